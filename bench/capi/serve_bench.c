/* Times bert_tf SavedModels through the TensorFlow C API, with no Python.
 *
 * The loader path of TF Serving: TF_LoadLibrary on the tensorflow-text op
 * libraries, TF_LoadSessionFromSavedModel (tag "serve"; restores the
 * variables and runs the asset initializers that fill the vocab table), then
 * TF_SessionRun of the serving_default signature's tensors with raw
 * TF_STRING inputs. Built and driven by bench/bench_serving_peers.py against
 * the tensorflow pip wheel (headers in tensorflow/include; TF_* symbols from
 * libtensorflow_cc.so.2, which needs libtensorflow_framework.so.2):
 *
 *   gcc -O2 -o serve_bench bench/capi/serve_bench.c -I$TF/include -L$TF \
 *       -l:libtensorflow_cc.so.2 -l:libtensorflow_framework.so.2 -Wl,-rpath,$TF
 *
 * Usage:
 *   serve_bench SPEC_FILE        serve mode: prints "ready", then answers
 *                                commands read from stdin, one per line:
 *     run <case> <k>             call number k of case <case> (0-based
 *                                index in the spec); prints the call's
 *                                time in nanoseconds: building the TF_STRING
 *                                input tensors from the bytes in memory +
 *                                TF_SessionRun + freeing the outputs
 *     dump <case> <k>            the same call; prints each output as
 *                                "<label> <dtype> <rank> <dims>... : <values>"
 *                                (floats %.9g, ints, strings as hex, "-" for
 *                                an empty string) and then "end"
 *     quit
 *   serve_bench SPEC_FILE N      standalone: per case 3 warm-up calls, then
 *                                N timed calls; prints
 *                                "<case> median_ms <m> p90_ms <p> calls <N>"
 *
 * SPEC_FILE lines (tensor names from the SavedModel's signature_def):
 *   config <hex>                 a serialized ConfigProto for TF_SetConfig
 *                                (e.g. intra_op_parallelism_threads); before
 *                                any model line
 *   lib <path>                   an op library .so (kept loaded)
 *   model <name> <dir>           a SavedModel version directory
 *   case <name> <model name>     a case; input/output lines refer to the
 *                                latest case
 *   input <op> <index> <batch> <strings file>
 *                                call k feeds records [k*batch, (k+1)*batch)
 *                                (modulo the number of groups) as a [batch]
 *                                TF_STRING tensor
 *   output <label> <op> <index>
 * A strings file holds records "<byte length>\n<bytes>" (any bytes).
 *
 * Errors: one line on stderr naming the step and TensorFlow's message; exit
 * status 1 (usage, spec), 2 (TensorFlow), 3 (memory).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensorflow/c/c_api.h"
#include "tensorflow/c/tf_tstring.h"

#define MAX_MODELS 8
#define MAX_CASES 16
#define MAX_IO 8

typedef struct {
  char name[128];
  TF_Graph* graph;
  TF_Session* session;
} Model;

typedef struct {
  TF_Output out;
  int batch;       /* records per call */
  size_t n;        /* records in the file */
  char** bufs;
  size_t* lens;
} Input;

typedef struct {
  char name[128];
  Model* model;
  int nin, nout;
  Input in[MAX_IO];
  TF_Output out[MAX_IO];
  char labels[MAX_IO][128];
} Case;

static Model models[MAX_MODELS];
static Case cases[MAX_CASES];
static int nmodels = 0, ncases = 0;
static TF_Status* status;

static void check(const char* what) {
  if (TF_GetCode(status) != TF_OK) {
    fprintf(stderr, "serve_bench: %s failed: code %d: %s\n", what,
            (int)TF_GetCode(status), TF_Message(status));
    exit(2);
  }
}

static void die(const char* msg, const char* arg) {
  fprintf(stderr, "serve_bench: %s%s\n", msg, arg ? arg : "");
  exit(1);
}

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) { fprintf(stderr, "serve_bench: out of memory\n"); exit(3); }
  return p;
}

static void* xrealloc(void* p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) { fprintf(stderr, "serve_bench: out of memory\n"); exit(3); }
  return p;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static void read_records(const char* path, Input* in) {
  FILE* f = fopen(path, "rb");
  if (!f) die("cannot open ", path);
  size_t cap = 16;
  in->n = 0;
  in->bufs = xmalloc(cap * sizeof(char*));
  in->lens = xmalloc(cap * sizeof(size_t));
  unsigned long len;
  while (fscanf(f, "%lu", &len) == 1) {
    if (fgetc(f) != '\n') die("bad record in ", path);
    if (in->n == cap) {
      cap *= 2;
      in->bufs = xrealloc(in->bufs, cap * sizeof(char*));
      in->lens = xrealloc(in->lens, cap * sizeof(size_t));
    }
    in->bufs[in->n] = xmalloc(len);
    if (fread(in->bufs[in->n], 1, len, f) != len) die("short record in ", path);
    in->lens[in->n++] = len;
  }
  fclose(f);
  if (in->batch < 1 || in->n < (size_t)in->batch) die("fewer records than the batch in ", path);
}

static TF_Output find_output(Model* m, const char* op, int index) {
  TF_Operation* o = TF_GraphOperationByName(m->graph, op);
  if (!o) die("no operation ", op);
  TF_Output out = {o, index};
  return out;
}

static void read_spec(const char* path) {
  FILE* spec = fopen(path, "r");
  if (!spec) die("cannot open ", path);
  TF_SessionOptions* opts = TF_NewSessionOptions();
  char kind[32];
  Case* c = NULL;
  while (fscanf(spec, "%31s", kind) == 1) {
    if (!strcmp(kind, "config")) {
      static char hex[8192];
      unsigned char proto[4096];
      if (fscanf(spec, "%8191s", hex) != 1) die("bad config line", NULL);
      size_t n = strlen(hex) / 2;
      if (n > sizeof(proto)) die("config too long", NULL);
      for (size_t i = 0; i < n; ++i) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) die("bad hex in config", NULL);
        proto[i] = (unsigned char)(hi * 16 + lo);
      }
      TF_SetConfig(opts, proto, n, status);
      check("TF_SetConfig");
    } else if (!strcmp(kind, "lib")) {
      char lib[4096];
      if (fscanf(spec, "%4095s", lib) != 1) die("bad lib line", NULL);
      TF_LoadLibrary(lib, status);  /* kept loaded for the process's life */
      check(lib);
    } else if (!strcmp(kind, "model")) {
      if (nmodels == MAX_MODELS) die("too many models", NULL);
      Model* m = &models[nmodels];
      char dir[4096];
      if (fscanf(spec, "%127s %4095s", m->name, dir) != 2) die("bad model line", NULL);
      m->graph = TF_NewGraph();
      TF_Buffer* meta_graph = TF_NewBuffer();
      const char* tags[] = {"serve"};
      m->session = TF_LoadSessionFromSavedModel(opts, NULL, dir, tags, 1, m->graph,
                                                meta_graph, status);
      check("TF_LoadSessionFromSavedModel");
      TF_DeleteBuffer(meta_graph);
      ++nmodels;
    } else if (!strcmp(kind, "case")) {
      if (ncases == MAX_CASES) die("too many cases", NULL);
      c = &cases[ncases++];
      char model[128];
      if (fscanf(spec, "%127s %127s", c->name, model) != 2) die("bad case line", NULL);
      c->model = NULL;
      for (int i = 0; i < nmodels; ++i)
        if (!strcmp(models[i].name, model)) c->model = &models[i];
      if (!c->model) die("case names an unknown model: ", model);
    } else if (!strcmp(kind, "input")) {
      if (!c || c->nin == MAX_IO) die("input line without a case (or too many)", NULL);
      char op[512], file[4096];
      int index;
      Input* in = &c->in[c->nin];
      if (fscanf(spec, "%511s %d %d %4095s", op, &index, &in->batch, file) != 4)
        die("bad input line", NULL);
      in->out = find_output(c->model, op, index);
      read_records(file, in);
      ++c->nin;
    } else if (!strcmp(kind, "output")) {
      if (!c || c->nout == MAX_IO) die("output line without a case (or too many)", NULL);
      char op[512];
      int index;
      if (fscanf(spec, "%127s %511s %d", c->labels[c->nout], op, &index) != 3)
        die("bad output line", NULL);
      c->out[c->nout++] = find_output(c->model, op, index);
    } else {
      die("bad spec line starting ", kind);
    }
  }
  fclose(spec);
  TF_DeleteSessionOptions(opts);
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
      case TF_BOOL: printf(" %d", (int)((unsigned char*)data)[i]); break;
      case TF_STRING: {
        const TF_TString* s = &((const TF_TString*)data)[i];
        const unsigned char* p = (const unsigned char*)TF_StringGetDataPointer(s);
        size_t n = TF_StringGetSize(s);
        printf(" ");
        if (n == 0) printf("-");
        for (size_t k = 0; k < n; ++k) printf("%02x", p[k]);
        break;
      }
      default: fprintf(stderr, "serve_bench: unsupported dtype %d\n", (int)dt); exit(2);
    }
  }
  printf("\n");
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One call of case c with input group k; returns its time in ns (input
 * tensors built from the bytes in memory, TF_SessionRun, outputs freed).
 * With dump set, prints the outputs first (inside the timed span; the time
 * is not used then). */
static double run_case(Case* c, long k, int dump) {
  TF_Output inputs[MAX_IO];
  TF_Tensor* in_values[MAX_IO];
  TF_Tensor* out_values[MAX_IO];
  double t0 = now_ns();
  for (int i = 0; i < c->nin; ++i) {
    Input* in = &c->in[i];
    size_t groups = in->n / (size_t)in->batch;
    size_t first = (size_t)(k % (long)groups) * (size_t)in->batch;
    int64_t dims[1] = {in->batch};
    TF_Tensor* t = TF_AllocateTensor(TF_STRING, dims, 1, in->batch * sizeof(TF_TString));
    TF_TString* data = (TF_TString*)TF_TensorData(t);
    for (int j = 0; j < in->batch; ++j) {
      TF_StringInit(&data[j]);
      TF_StringCopy(&data[j], in->bufs[first + j], in->lens[first + j]);
    }
    inputs[i] = in->out;
    in_values[i] = t;
  }
  for (int i = 0; i < c->nout; ++i) out_values[i] = NULL;
  TF_SessionRun(c->model->session, NULL, inputs, in_values, c->nin, c->out, out_values,
                c->nout, NULL, 0, NULL, status);
  check("TF_SessionRun");
  for (int i = 0; i < c->nout; ++i) {
    if (dump) print_tensor(c->labels[i], out_values[i]);
    TF_DeleteTensor(out_values[i]);
  }
  for (int i = 0; i < c->nin; ++i) {
    TF_TString* data = (TF_TString*)TF_TensorData(in_values[i]);
    for (int j = 0; j < c->in[i].batch; ++j) TF_StringDealloc(&data[j]);  /* heap copies */
    TF_DeleteTensor(in_values[i]);
  }
  return now_ns() - t0;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: serve_bench SPEC_FILE [N]\n");
    return 1;
  }
  status = TF_NewStatus();
  read_spec(argv[1]);
  if (argc == 3) {
    long n = atol(argv[2]);
    if (n < 1) die("N must be >= 1", NULL);
    double* t = xmalloc((size_t)n * sizeof(double));
    for (int ci = 0; ci < ncases; ++ci) {
      for (long k = 0; k < 3; ++k) run_case(&cases[ci], k, 0);
      for (long k = 0; k < n; ++k) t[k] = run_case(&cases[ci], k, 0);
      qsort(t, (size_t)n, sizeof(double), cmp_double);
      double median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
      long p90 = (long)(0.9 * (double)(n - 1) + 0.5);
      printf("%s median_ms %.4f p90_ms %.4f calls %ld\n", cases[ci].name, median / 1e6,
             t[p90] / 1e6, n);
    }
    free(t);
    return 0;
  }
  printf("ready\n");
  fflush(stdout);
  char cmd[32];
  while (scanf("%31s", cmd) == 1) {
    if (!strcmp(cmd, "quit")) break;
    int ci;
    long k;
    if (scanf("%d %ld", &ci, &k) != 2 || ci < 0 || ci >= ncases) die("bad command ", cmd);
    if (!strcmp(cmd, "run")) {
      printf("%.0f\n", run_case(&cases[ci], k, 0));
    } else if (!strcmp(cmd, "dump")) {
      run_case(&cases[ci], k, 1);
      printf("end\n");
    } else {
      die("unknown command ", cmd);
    }
    fflush(stdout);
  }
  for (int i = 0; i < nmodels; ++i) {
    TF_CloseSession(models[i].session, status);
    TF_DeleteSession(models[i].session, status);
    TF_DeleteGraph(models[i].graph);
  }
  TF_DeleteStatus(status);
  return 0;
}
