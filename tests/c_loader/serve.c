/* Loads a bert_tf SavedModel the way TF Serving does, with no Python.
 *
 * Built by tests/test_export.py against the TensorFlow wheel's
 * libtensorflow_cc.so.2 + libtensorflow_framework.so.2 and the headers in
 * tensorflow/include:
 *   1. TF_LoadLibrary on each tensorflow-text op library (the export's
 *      metadata lists which: "op_libraries");
 *   2. TF_LoadSessionFromSavedModel with tag "serve" (the C++ SavedModel
 *      loader that TF Serving uses: restores variables, runs the asset
 *      initializers that fill the vocab table);
 *   3. TF_SessionRun of the serving signature with raw TF_STRING inputs;
 *   4. prints every requested output.
 *
 * Usage: serve SPEC_FILE
 * SPEC_FILE lines (tensor names come from the signature_def):
 *   model <saved_model_dir>
 *   lib <path to an op library .so>
 *   input <operation name> <output index> <strings file>
 *   output <label> <operation name> <output index>
 * A strings file holds records "<byte length>\n<bytes>" (any bytes).
 *
 * Output, one line per requested output:
 *   <label> <dtype> <rank> <dim>... : <values>
 * floats as %.9g, ints as %lld, bools as 0/1, strings as hex.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/c_api.h"
#include "tensorflow/c/tf_tstring.h"

#define MAX_IO 16

static void check(TF_Status* s, const char* what) {
  if (TF_GetCode(s) != TF_OK) {
    fprintf(stderr, "serve: %s failed: code %d: %s\n", what, (int)TF_GetCode(s),
            TF_Message(s));
    exit(2);
  }
}

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) { fprintf(stderr, "serve: out of memory\n"); exit(3); }
  return p;
}

/* Reads a strings file into a [n] TF_STRING tensor. */
static TF_Tensor* read_strings(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "serve: cannot open %s\n", path); exit(2); }
  size_t cap = 16, n = 0;
  char** bufs = xmalloc(cap * sizeof(char*));
  size_t* lens = xmalloc(cap * sizeof(size_t));
  unsigned long len;
  while (fscanf(f, "%lu", &len) == 1) {
    if (fgetc(f) != '\n') { fprintf(stderr, "serve: bad record in %s\n", path); exit(2); }
    if (n == cap) {
      cap *= 2;
      bufs = realloc(bufs, cap * sizeof(char*));
      lens = realloc(lens, cap * sizeof(size_t));
    }
    bufs[n] = xmalloc(len);
    if (fread(bufs[n], 1, len, f) != len) {
      fprintf(stderr, "serve: short record in %s\n", path); exit(2);
    }
    lens[n++] = len;
  }
  fclose(f);
  int64_t dims[1] = {(int64_t)n};
  TF_Tensor* t = TF_AllocateTensor(TF_STRING, dims, 1, n * sizeof(TF_TString));
  TF_TString* data = (TF_TString*)TF_TensorData(t);
  for (size_t i = 0; i < n; ++i) {
    TF_StringInit(&data[i]);
    TF_StringCopy(&data[i], bufs[i], lens[i]);
    free(bufs[i]);
  }
  free(bufs);
  free(lens);
  return t;
}

static void print_tensor(const char* label, TF_Tensor* t) {
  int rank = TF_NumDims(t);
  int64_t count = 1;
  TF_DataType dt = TF_TensorType(t);
  printf("%s %d %d", label, (int)dt, rank);
  for (int d = 0; d < rank; ++d) {
    printf(" %lld", (long long)TF_Dim(t, d));
    count *= TF_Dim(t, d);
  }
  printf(" :");
  void* data = TF_TensorData(t);
  for (int64_t i = 0; i < count; ++i) {
    switch (dt) {
      case TF_FLOAT: printf(" %.9g", (double)((float*)data)[i]); break;
      case TF_INT32: printf(" %d", ((int32_t*)data)[i]); break;
      case TF_INT64: printf(" %lld", (long long)((int64_t*)data)[i]); break;
      case TF_BOOL: printf(" %d", ((unsigned char*)data)[i] ? 1 : 0); break;
      case TF_STRING: {
        const TF_TString* s = &((const TF_TString*)data)[i];
        const unsigned char* p = (const unsigned char*)TF_StringGetDataPointer(s);
        size_t n = TF_StringGetSize(s);
        printf(" ");
        if (n == 0) printf("-");
        for (size_t k = 0; k < n; ++k) printf("%02x", p[k]);
        break;
      }
      default: fprintf(stderr, "serve: unsupported dtype %d\n", (int)dt); exit(2);
    }
  }
  printf("\n");
}

int main(int argc, char** argv) {
  if (argc != 2) { fprintf(stderr, "usage: serve SPEC_FILE\n"); return 1; }
  FILE* spec = fopen(argv[1], "r");
  if (!spec) { fprintf(stderr, "serve: cannot open %s\n", argv[1]); return 1; }
  TF_Status* status = TF_NewStatus();
  char model_dir[4096] = "";
  char in_ops[MAX_IO][512], out_ops[MAX_IO][512], labels[MAX_IO][128];
  char in_files[MAX_IO][4096];
  int in_idx[MAX_IO], out_idx[MAX_IO], nin = 0, nout = 0;
  char kind[32];
  while (fscanf(spec, "%31s", kind) == 1) {
    if (!strcmp(kind, "model")) {
      if (fscanf(spec, "%4095s", model_dir) != 1) return 1;
    } else if (!strcmp(kind, "lib")) {
      char path[4096];
      if (fscanf(spec, "%4095s", path) != 1) return 1;
      TF_Library* lib = TF_LoadLibrary(path, status);  /* kept loaded */
      check(status, path);
      (void)lib;
    } else if (!strcmp(kind, "input") && nin < MAX_IO) {
      if (fscanf(spec, "%511s %d %4095s", in_ops[nin], &in_idx[nin], in_files[nin]) != 3)
        return 1;
      ++nin;
    } else if (!strcmp(kind, "output") && nout < MAX_IO) {
      if (fscanf(spec, "%127s %511s %d", labels[nout], out_ops[nout], &out_idx[nout]) != 3)
        return 1;
      ++nout;
    } else {
      fprintf(stderr, "serve: bad spec line starting %s\n", kind);
      return 1;
    }
  }
  fclose(spec);

  TF_Graph* graph = TF_NewGraph();
  TF_SessionOptions* opts = TF_NewSessionOptions();
  TF_Buffer* meta_graph = TF_NewBuffer();
  const char* tags[] = {"serve"};
  TF_Session* session = TF_LoadSessionFromSavedModel(
      opts, NULL, model_dir, tags, 1, graph, meta_graph, status);
  check(status, "TF_LoadSessionFromSavedModel");
  fprintf(stderr, "serve: loaded %s (MetaGraphDef %zu bytes)\n", model_dir,
          meta_graph->length);

  TF_Output inputs[MAX_IO], outputs[MAX_IO];
  TF_Tensor* in_values[MAX_IO];
  TF_Tensor* out_values[MAX_IO];
  for (int i = 0; i < nin; ++i) {
    TF_Operation* op = TF_GraphOperationByName(graph, in_ops[i]);
    if (!op) { fprintf(stderr, "serve: no operation %s\n", in_ops[i]); return 2; }
    inputs[i].oper = op;
    inputs[i].index = in_idx[i];
    in_values[i] = read_strings(in_files[i]);
  }
  for (int i = 0; i < nout; ++i) {
    TF_Operation* op = TF_GraphOperationByName(graph, out_ops[i]);
    if (!op) { fprintf(stderr, "serve: no operation %s\n", out_ops[i]); return 2; }
    outputs[i].oper = op;
    outputs[i].index = out_idx[i];
    out_values[i] = NULL;
  }
  TF_SessionRun(session, NULL, inputs, in_values, nin, outputs, out_values, nout,
                NULL, 0, NULL, status);
  check(status, "TF_SessionRun");
  for (int i = 0; i < nout; ++i) {
    print_tensor(labels[i], out_values[i]);
    TF_DeleteTensor(out_values[i]);
  }
  TF_CloseSession(session, status);
  TF_DeleteSession(session, status);
  TF_DeleteBuffer(meta_graph);
  TF_DeleteSessionOptions(opts);
  TF_DeleteGraph(graph);
  TF_DeleteStatus(status);
  return 0;
}
