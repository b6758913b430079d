/* Harness: the in-pod launcher's configuration readers (src/launcher/tfk8s_launcher.c): its JSON
 * reader on TF_CONFIG and TF_CLUSTER, the seed's CLUSTER_SPEC ("ps|h0:2222;h1:2222,worker|..."),
 * the task index and hostname rules (resolve_topology), and the TF_CONFIG it exports
 * (tf_config_json). Whoever may create a TFCluster or edit its pods' environment writes these.
 *
 * The launcher is one C file of static functions built into a musl binary (CMakeLists.txt); this
 * harness includes it whole, with its main() renamed (libFuzzer brings its own) and its
 * malloc/free counted: the launcher is a short-lived process that never frees what it parses, so
 * the harness releases every block after each input (ASan still checks each one).
 *
 * Input: byte 0 = the source (0: TF_CONFIG, 1: TF_CLUSTER, 2: CLUSTER_SPEC); byte 1 = RESOURCE_NAME
 * (% 5: unset, worker, ps, chief, evaluator), TASK_INDEX (/ 5 % 3: unset, "0", "1") and the
 * hostname (/ 15 % 2: c-worker-0, c-worker-1.svc.cluster.local); the rest (up to a NUL, as in an
 * environment variable) = the variable's value.
 * Properties: a refusal always says why; an accepted topology has a role, and an index inside the
 * role's replicas when the cluster lists the role; the exported TF_CONFIG is the given one
 * (stripped) or JSON that the launcher's own reader reads back to the same cluster (role order,
 * addresses), task type and index (when every name is valid UTF-8: the writer escapes code
 * points, as Python's json.dumps does). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Every block the launcher allocates while reading one input (freed ones removed). */
static void** fuzz_blocks;
static size_t fuzz_blocks_n, fuzz_blocks_cap;

static void* fuzz_malloc(size_t n) {
  void* p = malloc(n);
  if (!p) return NULL;
  if (fuzz_blocks_n == fuzz_blocks_cap) {
    fuzz_blocks_cap = fuzz_blocks_cap ? fuzz_blocks_cap * 2 : 256;
    void** grown = realloc(fuzz_blocks, fuzz_blocks_cap * sizeof *grown);
    if (!grown) abort();
    fuzz_blocks = grown;
  }
  fuzz_blocks[fuzz_blocks_n++] = p;
  return p;
}

static void fuzz_free(void* p) {
  if (!p) return;
  for (size_t i = fuzz_blocks_n; i-- > 0;) {
    if (fuzz_blocks[i] == p) {
      fuzz_blocks[i] = fuzz_blocks[--fuzz_blocks_n];
      break;
    }
  }
  free(p);
}

static void fuzz_release(void) {
  for (size_t i = 0; i < fuzz_blocks_n; ++i) free(fuzz_blocks[i]);
  fuzz_blocks_n = 0;
}

#define malloc(n) fuzz_malloc(n)
#define free(p) fuzz_free(p)
#define main tfk8s_launcher_main
#include "../../src/launcher/tfk8s_launcher.c"
#undef main
#undef free
#undef malloc

static void fuzz_fail(const char* what, const char* input) {
  fprintf(stderr, "FUZZ PROPERTY VIOLATED: %s\ninput: %s\n", what, input);
  abort();
}

/* Strict UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). */
static int valid_utf8(const char* s) {
  const unsigned char* p = (const unsigned char*)s;
  while (*p) {
    unsigned c = *p, cp, extra;
    if (c < 0x80) {
      ++p;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF)
      extra = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
      extra = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
      extra = 3, cp = c & 0x07;
    else
      return 0;
    ++p;
    for (unsigned i = 0; i < extra; ++i, ++p) {
      if ((*p & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (*p & 0x3F);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp < 0xE000)) {
      return 0;
    }
  }
  return 1;
}

static int cluster_valid_utf8(const Cluster* c) {
  for (size_t i = 0; i < c->n; ++i) {
    if (!valid_utf8(c->roles[i].role)) return 0;
    for (size_t k = 0; k < c->roles[i].n; ++k) {
      if (!valid_utf8(c->roles[i].addresses[k])) return 0;
    }
  }
  return 1;
}

/* Reads the exported TF_CONFIG back and compares it with the topology. */
static void check_exported(const Topology* t, const char* exported, const char* input) {
  char* error = NULL;
  Json* config = json_parse(exported, &error);
  if (!config || config->type != J_OBJECT) fuzz_fail("the exported TF_CONFIG is not JSON", input);
  Cluster back = {0};
  config_error = NULL;
  if (cluster_from_json(json_get(config, "cluster"), "exported", &back)) {
    fuzz_fail("the exported cluster does not read back", input);
  }
  if (back.n != t->cluster.n) fuzz_fail("the exported cluster has other roles", input);
  for (size_t i = 0; i < back.n; ++i) {
    const Role *a = &t->cluster.roles[i], *b = &back.roles[i];
    if (strcmp(a->role, b->role) != 0 || a->n != b->n) {
      fuzz_fail("the exported cluster has another role or count", input);
    }
    for (size_t k = 0; k < a->n; ++k) {
      if (strcmp(a->addresses[k], b->addresses[k]) != 0) {
        fuzz_fail("the exported cluster has another address", input);
      }
    }
  }
  const Json* task = json_get(config, "task");
  const Json* type = task && task->type == J_OBJECT ? json_get(task, "type") : NULL;
  const Json* index = task && task->type == J_OBJECT ? json_get(task, "index") : NULL;
  if (!type || type->type != J_STRING || strcmp(type->text, t->role) != 0) {
    fuzz_fail("the exported task type is not the role", input);
  }
  char expected[32];
  snprintf(expected, sizeof expected, "%ld", t->index);
  if (!index || index->type != J_NUMBER || strcmp(index->text, expected) != 0) {
    fuzz_fail("the exported task index is not the index", input);
  }
}

/* The launcher's variables, each a putenv'ed buffer rewritten in place: setenv would leak the
 * old value on every input (glibc keeps them). An empty value counts as unset for the launcher. */
enum { VAR_SIZE = 1 << 16 };
static char vars[5][VAR_SIZE];

static void set_var(size_t i, const char* name, const char* value) {
  if (!vars[i][0]) {
    snprintf(vars[i], VAR_SIZE, "%s=", name);
    putenv(vars[i]);
  }
  snprintf(vars[i] + strlen(name) + 1, VAR_SIZE - strlen(name) - 1, "%s", value ? value : "");
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > VAR_SIZE - 64) return 0;
  static const char* const sources[] = {"TF_CONFIG", "TF_CLUSTER", "CLUSTER_SPEC"};
  static const char* const roles[] = {NULL, "worker", "ps", "chief", "evaluator"};
  static const char* const indexes[] = {NULL, "0", "1"};
  static const char* const hostnames[] = {"c-worker-0", "c-worker-1.svc.cluster.local"};
  const size_t source = data[0] % 3;
  const char* hostname = hostnames[data[1] / 15 % 2];
  size_t n = strnlen((const char*)data + 2, size - 2);
  char* value = malloc(n + 1);
  memcpy(value, data + 2, n);
  value[n] = 0;
  for (size_t i = 0; i < 3; ++i) set_var(i, sources[i], i == source ? value : NULL);
  set_var(3, "RESOURCE_NAME", roles[data[1] % 5]);
  set_var(4, "TASK_INDEX", indexes[data[1] / 5 % 3]);

  Topology t;
  config_error = NULL;
  if (resolve_topology(hostname, &t) != 0) {
    if (!config_error || !*config_error) fuzz_fail("refused without a reason", value);
  } else {
    if (!t.role || !*t.role) fuzz_fail("accepted without a role", value);
    const Role* r = cluster_role(&t.cluster, t.role);
    if (r && (t.index < 0 || (size_t)t.index >= r->n)) {
      fuzz_fail("accepted an index outside the role's replicas", value);
    }
    if (!r && strcmp(t.role, "evaluator") != 0) fuzz_fail("accepted a role not listed", value);
    char* exported = tf_config_json(&t);
    if (t.tf_config) {
      char* given = strip(value);
      if (strcmp(exported, given) != 0) fuzz_fail("TF_CONFIG was not exported as given", value);
    } else if (cluster_valid_utf8(&t.cluster) && valid_utf8(t.role)) {
      check_exported(&t, exported, value);
    }
  }
  fuzz_release();
  free(value);
  return 0;
}
