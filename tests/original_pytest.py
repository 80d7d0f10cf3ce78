"""``python tests/original_pytest.py ARGS...`` is ``python -m pytest ARGS...``.

As a script in ``tool_server.REFERENCE_SCRIPTS`` it runs in a child forked
from the tests' warm interpreter (``conftest.run_tool``): a process of its
own whose TensorFlow is already imported, for the original BERT's own test
files (``tests/test_original_tokenization_suite.py``), which check nothing
that happens while TensorFlow loads. Not a test module.
"""

import sys

import pytest

if __name__ == "__main__":
  sys.exit(pytest.main(sys.argv[1:]))
