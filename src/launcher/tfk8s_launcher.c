/* The tfk8s launcher: every TFCluster replica (ps, worker, chief, evaluator) starts through it.
 *
 *   tfk8s-launcher [--python PYTHON] [--] PROGRAM [ARGS...]
 *   tfk8s-launcher [--python PYTHON]     the role's default program (a TensorFlow server)
 *   tfk8s-launcher --install DEST        copies itself to DEST (mode 0555) and exits
 *
 * One C11/POSIX file without dependencies, built static against musl (CMakeLists.txt), so it
 * starts in about a millisecond of CPU in any image (with or without Python or glibc): the C++
 * library embeds the binary and a TFCluster's root ConfigMap mounts it into every replica. It
 *
 * 1. works out the cluster, the replica's role and index (TF_CONFIG; else TF_CLUSTER with
 *    RESOURCE_NAME and the index from the hostname; else the seed's CLUSTER_SPEC) and exports
 *    TF_CONFIG, TASK_INDEX and TASK_TYPE to the program;
 * 2. holds a start-up barrier: it listens on the replica's own port so that peers see it, and
 *    waits until every other address of the cluster resolves and accepts a TCP connection
 *    (one probing thread per peer, at most 16 probes at once, musl's resolver);
 * 3. runs the program as its child (it is PID 1 of the container: it forwards SIGTERM, SIGINT
 *    and SIGHUP, reaps orphans, and exits with the program's code);
 * 4. with TFK8S_LOG_DIR, keeps each start's output on the shared volume and first prints what
 *    the earlier starts said (see "incarnations"); a replica that has started before skips the
 *    barrier of step 2.
 *
 * The placeholder listener of step 2 accepts and closes every connection at once. After the
 * barrier it stays open until every peer that was itself still in its barrier (its port answered
 * by a placeholder, which closes at once, not by a program) has reached this replica, so that a
 * peer with a slower resolver or a later start does not find the port closed and wait for the
 * program forever; peers are recognised by their IP address (replicas sharing one are counted).
 * It waits at most
 * TFK8S_BARRIER_LINGER seconds for them, then closes before the program starts, so the program
 * can bind the same port. A program that connects to a peer during that time meets the
 * placeholder, which closes the connection at once: clients must retry, as gRPC does.
 *
 * The launcher's own failures end with a one-line "tfk8s: ..." verdict on stderr and in the
 * termination log, which Kubernetes shows as the container's termination message and the
 * library treats as final (starting again cannot help); a failed program leaves "<role>-<i>:
 * program exited with code N" there instead, since its Job may run it again. Exit codes: the
 * program's own (128 + N when it was killed by signal N), 2 for a bad configuration or no
 * program for the role, 3 for a start-up barrier that timed out, 126 / 127 for a program that
 * cannot be started. Messages are those of the former Python launcher, word for word.
 *
 * tests/fuzz/fuzz_launcher.c includes this file (with main renamed and malloc/free counted) to
 * fuzz the configuration readers: keep them reachable as static functions.
 */
#define _GNU_SOURCE
#include <dirent.h>
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static const char USAGE[] =
    "usage: tfk8s-launcher [-h] [--python PYTHON] [--] [PROGRAM [ARGS...]]\n"
    "       tfk8s-launcher --install DEST\n"
    "\n"
    "The tfk8s launcher: works out this replica's place in the TensorFlow cluster, waits until\n"
    "every peer is reachable (the start-up barrier), then runs PROGRAM as its child.\n"
    "\n"
    "Without PROGRAM, a ps replica (and a worker under TFK8S_STRATEGY=parameter-server) runs a\n"
    "TensorFlow server (PYTHON -c ...) when tensorflow is importable in PYTHON; other roles need\n"
    "a program.\n"
    "\n"
    "Options:\n"
    "  --python PYTHON           the interpreter of the default TensorFlow server (default\n"
    "                            python3, looked up in PATH)\n"
    "  --install DEST            copy this executable to the file DEST (mode 0555, replaced\n"
    "                            atomically) and exit: 0 when done, 1 when not (an init\n"
    "                            container's way to hand the launcher to its pod's replica)\n"
    "Environment (read):\n"
    "  TF_CONFIG                 {\"cluster\": {...}, \"task\": {\"type\": ROLE, \"index\": I}}\n"
    "  TF_CLUSTER                the cluster map alone; the role is RESOURCE_NAME and the index\n"
    "                            TASK_INDEX, else the last '-' field of the hostname\n"
    "  CLUSTER_SPEC              the seed's format: ps|h:2222;h:2222,worker|h:2222\n"
    "  RESOURCE_NAME             the role (with TF_CLUSTER / CLUSTER_SPEC)\n"
    "  HOSTNAME                  the hostname (default: gethostname())\n"
    "  TFK8S_BARRIER_TIMEOUT     seconds the barrier waits for peers (default 600; 0: no barrier)\n"
    "  TFK8S_BARRIER_REPORT      seconds between progress lines (default 5)\n"
    "  TFK8S_BARRIER_LINGER      at most this many seconds the placeholder listener stays open\n"
    "                            after the barrier, for peers still in theirs (default 60)\n"
    "  TFK8S_STRATEGY            parameter-server, multi-worker-mirrored, ... (optional)\n"
    "  TFK8S_TERMINATION_LOG     where failure messages go (default /dev/termination-log when it\n"
    "                            is writable; empty: nowhere)\n"
    "  TFK8S_LOG_DIR             keep each start's output in DIR/ROLE-INDEX.N.log and print the\n"
    "                            earlier starts' output first (their last 64 KiB each); a program\n"
    "                            that exits 0 removes them (optional)\n"
    "  TFK8S_LOG_LIMIT           bytes kept per start (default 16777216)\n"
    "Environment (exported to PROGRAM): TF_CONFIG, TASK_INDEX, TASK_TYPE.\n"
    "\n"
    "Exit codes: PROGRAM's own (128+N if it was killed by signal N); 2 bad configuration or no\n"
    "program for the role; 3 start-up barrier timed out; 126 PROGRAM not executable; 127 PROGRAM\n"
    "not found.\n";

#define PREFIX "tfk8s launcher: "
enum { EXIT_CONFIG = 2, EXIT_BARRIER = 3, EXIT_NOT_EXECUTABLE = 126, EXIT_NOT_FOUND = 127 };
#define DEFAULT_TERMINATION_LOG "/dev/termination-log"
/* Kubernetes keeps at most 4096 bytes of a termination message. */
enum { TERMINATION_MESSAGE_LIMIT = 4096 };
static const int CONNECT_TIMEOUT_MS = 1000;
static const long RETRY_INTERVAL_NS = 500000000L;
/* How long a probe waits, once connected, to tell a peer's placeholder (which closes at once)
 * from its program (which keeps the connection open, or speaks). */
static const int PLACEHOLDER_WAIT_MS = 300;

/* The default program of a ps (run as `PYTHON -c`): a TensorFlow server for TF_CONFIG's task. */
static const char TF_SERVER_CODE[] =
    "import json, os\n"
    "import tensorflow as tf\n"
    "config = json.loads(os.environ[\"TF_CONFIG\"])\n"
    "task = config[\"task\"]\n"
    "tf.distribute.Server(tf.train.ClusterSpec(config[\"cluster\"]), job_name=task[\"type\"],\n"
    "                     task_index=int(task[\"index\"]), protocol=\"grpc\", start=True).join()\n";
/* Whether `import tensorflow` would find the package, without importing it (seconds, memory). */
static const char TF_IMPORTABLE_CODE[] =
    "import importlib.util, sys\n"
    "try:\n"
    "    found = importlib.util.find_spec('tensorflow') is not None\n"
    "except (ImportError, ValueError):\n"
    "    found = False\n"
    "sys.exit(0 if found else 1)\n";

/* ---- strings ------------------------------------------------------------------------------ */

typedef struct {
  char* s;
  size_t n, cap;
} Str;

static void* xmalloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) {
    static const char oom[] = "tfk8s: launcher: out of memory\n";
    (void)!write(2, oom, sizeof oom - 1);
    _exit(EXIT_CONFIG);
  }
  return p;
}

static void str_reserve(Str* b, size_t extra) {
  if (b->n + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->n + extra + 1) cap *= 2;
  char* s = xmalloc(cap);
  if (b->s) memcpy(s, b->s, b->n);
  free(b->s);
  b->s = s;
  b->cap = cap;
  b->s[b->n] = 0;
}

static void str_addn(Str* b, const char* s, size_t n) {
  str_reserve(b, n);
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

static void str_add(Str* b, const char* s) { str_addn(b, s, strlen(s)); }

static void str_vaddf(Str* b, const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return;
  str_reserve(b, (size_t)n);
  vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
  b->n += (size_t)n;
}

static void str_addf(Str* b, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  str_vaddf(b, fmt, ap);
  va_end(ap);
}

static char* xstrndup(const char* s, size_t n) {
  char* out = xmalloc(n + 1);
  memcpy(out, s, n);
  out[n] = 0;
  return out;
}

static char* xstrdup(const char* s) { return xstrndup(s, strlen(s)); }

static char* fmt(const char* f, ...) {
  Str b = {0};
  va_list ap;
  va_start(ap, f);
  str_vaddf(&b, f, ap);
  va_end(ap);
  return b.s ? b.s : xstrdup("");
}

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Python's str.strip() for ASCII whitespace: a new string. */
static char* strip(const char* s) {
  size_t a = 0, b = strlen(s);
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  return xstrndup(s + a, b - a);
}

/* Whether s is a non-empty run of ASCII digits. */
static int all_digits(const char* s) {
  if (!*s) return 0;
  for (; *s; ++s) {
    if (!is_digit(*s)) return 0;
  }
  return 1;
}

/* A run of digits as a number, -1 when it is larger than `max`. */
static long digits_value(const char* s, long max) {
  while (*s == '0' && s[1]) ++s; /* leading zeros count for nothing, as in Python's int() */
  if (strlen(s) > 12) return -1;
  long v = strtol(s, NULL, 10);
  return v > max ? -1 : v;
}

/* Characters (code points) of UTF-8 text, as Python's len() counts them. */
static size_t char_count(const char* s, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += ((unsigned char)s[i] & 0xC0) != 0x80;
  return count;
}

/* Python's repr() of a str: 'text' (or "text" when it holds ' but no "). */
static char* py_repr(const char* s) {
  char quote = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
  Str b = {0};
  str_addn(&b, &quote, 1);
  for (const unsigned char* p = (const unsigned char*)s; *p; ++p) {
    if (*p == '\\' || *p == (unsigned char)quote) {
      str_addf(&b, "\\%c", *p);
    } else if (*p == '\n') {
      str_add(&b, "\\n");
    } else if (*p == '\r') {
      str_add(&b, "\\r");
    } else if (*p == '\t') {
      str_add(&b, "\\t");
    } else if (*p < 0x20 || *p == 0x7f) {
      str_addf(&b, "\\x%02x", *p);
    } else {
      str_addn(&b, (const char*)p, 1);
    }
  }
  str_addn(&b, &quote, 1);
  return b.s;
}

/* A JSON string as Python's json.dumps writes it (ensure_ascii: \uXXXX for non-ASCII). */
static void json_string(Str* b, const char* s) {
  str_add(b, "\"");
  const unsigned char* p = (const unsigned char*)s;
  while (*p) {
    unsigned c = *p;
    if (c == '"' || c == '\\') {
      str_addf(b, "\\%c", c);
      ++p;
    } else if (c < 0x20) {
      static const char* const named[] = {
          [8] = "\\b", [9] = "\\t", [10] = "\\n", [12] = "\\f", [13] = "\\r"};
      if (c < 14 && named[c]) {
        str_add(b, named[c]);
      } else {
        str_addf(b, "\\u%04x", c);
      }
      ++p;
    } else if (c < 0x80) {
      str_addn(b, (const char*)p, 1);
      ++p;
    } else {
      int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
      unsigned cp = c & (0x3F >> extra);
      ++p;
      for (int i = 0; i < extra && (*p & 0xC0) == 0x80; ++i, ++p) cp = (cp << 6) | (*p & 0x3F);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        str_addf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        str_addf(b, "\\u%04x", cp);
      }
    }
  }
  str_add(b, "\"");
}

/* glibc's texts for the errors whose musl text differs (messages match the Python launcher's,
 * which used the image's glibc). */
static const char* error_text(int e) {
  switch (e) {
    case EADDRINUSE:
      return "Address already in use";
    case EADDRNOTAVAIL:
      return "Cannot assign requested address";
    case ENOMEM:
      return "Cannot allocate memory";
    case ELOOP:
      return "Too many levels of symbolic links";
    case ENAMETOOLONG:
      return "File name too long";
    case ETIMEDOUT:
      return "Connection timed out";
    case ECONNRESET:
      return "Connection reset by peer";
    case EHOSTUNREACH:
      return "No route to host";
    case ENETUNREACH:
      return "Network is unreachable";
    default:
      return strerror(e);
  }
}

/* Python's signal.Signals(n).name, else "signal N". */
static const char* signal_name(int signum) {
  static const char* const names[] = {
      [SIGHUP] = "SIGHUP",       [SIGINT] = "SIGINT",       [SIGQUIT] = "SIGQUIT",
      [SIGILL] = "SIGILL",       [SIGTRAP] = "SIGTRAP",     [SIGABRT] = "SIGABRT",
      [SIGBUS] = "SIGBUS",       [SIGFPE] = "SIGFPE",       [SIGKILL] = "SIGKILL",
      [SIGUSR1] = "SIGUSR1",     [SIGSEGV] = "SIGSEGV",     [SIGUSR2] = "SIGUSR2",
      [SIGPIPE] = "SIGPIPE",     [SIGALRM] = "SIGALRM",     [SIGTERM] = "SIGTERM",
      [SIGSTKFLT] = "SIGSTKFLT", [SIGCHLD] = "SIGCHLD",     [SIGCONT] = "SIGCONT",
      [SIGSTOP] = "SIGSTOP",     [SIGTSTP] = "SIGTSTP",     [SIGTTIN] = "SIGTTIN",
      [SIGTTOU] = "SIGTTOU",     [SIGURG] = "SIGURG",       [SIGXCPU] = "SIGXCPU",
      [SIGXFSZ] = "SIGXFSZ",     [SIGVTALRM] = "SIGVTALRM", [SIGPROF] = "SIGPROF",
      [SIGWINCH] = "SIGWINCH",   [SIGIO] = "SIGIO",         [SIGPWR] = "SIGPWR",
      [SIGSYS] = "SIGSYS",       [34] = "SIGRTMIN",         [64] = "SIGRTMAX"};
  static char other[32];
  if (signum > 0 && signum <= 64 && names[signum]) return names[signum];
  snprintf(other, sizeof other, "signal %d", signum);
  return other;
}

/* ---- messages ------------------------------------------------------------------------------ */

static void write_all(int fd, const char* s, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

/* This incarnation's copy of its output on the shared volume (TFK8S_LOG_DIR; see "incarnations"
 * below): -1 while there is none. Everything the launcher and the program print goes to it too. */
static int kept_fd = -1;
static size_t kept_bytes, kept_limit;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

static void keep(const char* s, size_t n) {
  pthread_mutex_lock(&kept_lock);
  if (kept_fd >= 0) {
    if (kept_bytes + n > kept_limit) {
      static const char full[] =
          "\ntfk8s launcher: the kept copy of this output is full; the rest "
          "is only in the container's log\n";
      write_all(kept_fd, full, sizeof full - 1);
      close(kept_fd);
      kept_fd = -1;
    } else {
      write_all(kept_fd, s, n);
      kept_bytes += n;
    }
  }
  pthread_mutex_unlock(&kept_lock);
}

/* One informational line on stderr (one write, so lines of threads never mix). */
static void say(const char* f, ...) {
  Str b = {0};
  str_add(&b, PREFIX);
  va_list ap;
  va_start(ap, f);
  str_vaddf(&b, f, ap);
  va_end(ap);
  str_add(&b, "\n");
  write_all(2, b.s, b.n);
  keep(b.s, b.n);
  free(b.s);
}

static const char* termination_log; /* NULL: none */

static void write_termination_log(const char* message) {
  if (!termination_log) return;
  size_t n = strlen(message);
  Str b = {0};
  if (n <= TERMINATION_MESSAGE_LIMIT) {
    str_addn(&b, message, n);
  } else {
    /* Cut to the limit with "...", never inside a UTF-8 sequence. */
    size_t cut = TERMINATION_MESSAGE_LIMIT - 3;
    if (((unsigned char)message[cut] & 0xC0) == 0x80) {
      while (cut > 0 && ((unsigned char)message[cut] & 0xC0) == 0x80) --cut;
    }
    str_addn(&b, message, cut);
    str_add(&b, "...");
  }
  int fd = open(termination_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    say("cannot write the termination log %s: %s", termination_log, error_text(errno));
  } else {
    write_all(fd, b.s, b.n);
    close(fd);
  }
  free(b.s);
}

/* The termination log's current content ("" when there is none). */
static char* read_termination_log(void) {
  Str b = {0};
  str_add(&b, "");
  if (!termination_log) return b.s;
  int fd = open(termination_log, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return b.s;
  char buf[TERMINATION_MESSAGE_LIMIT];
  size_t total = 0;
  while (total < sizeof buf) {
    ssize_t r = read(fd, buf + total, sizeof buf - total);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    total += (size_t)r;
  }
  close(fd);
  str_addn(&b, buf, total);
  return b.s;
}

/* Reports a failure (stderr and the termination log) and returns its exit code. */
static int fail(const char* message, int code) {
  Str b = {0};
  str_add(&b, message);
  str_add(&b, "\n");
  write_all(2, b.s, b.n);
  keep(b.s, b.n);
  free(b.s);
  write_termination_log(message);
  return code;
}

/* A configuration error: "tfk8s: <why>", exit 2. */
static char* config_error;

static int config_fail(const char* f, ...) {
  Str b = {0};
  va_list ap;
  va_start(ap, f);
  str_vaddf(&b, f, ap);
  va_end(ap);
  config_error = b.s;
  return -1;
}

/* ---- a small JSON reader (what TF_CONFIG / TF_CLUSTER need, Python's json.loads rules) ----- */

typedef enum { J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT } JType;

typedef struct Json {
  JType type;
  char* text;          /* a string's decoded value; a number's, an array's or object's source */
  struct Json** items; /* array items, or object values */
  char** keys;         /* object keys */
  size_t n;
} Json;

typedef struct {
  const char *doc, *p;
  const char* error;
  const char* error_at;
  int depth;
} JParser;

static Json* jnew(JType type) {
  Json* j = xmalloc(sizeof *j);
  memset(j, 0, sizeof *j);
  j->type = type;
  return j;
}

static void jskip(JParser* q) {
  while (*q->p == ' ' || *q->p == '\t' || *q->p == '\n' || *q->p == '\r') ++q->p;
}

static Json* jerror(JParser* q, const char* what, const char* at) {
  if (!q->error) {
    q->error = what;
    q->error_at = at;
  }
  return NULL;
}

static int hex4(const char* p, unsigned* out) {
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return 0;
  }
  *out = v;
  return 1;
}

static void utf8(Str* b, unsigned cp) {
  char o[4];
  if (cp < 0x80) {
    o[0] = (char)cp;
    str_addn(b, o, 1);
  } else if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    str_addn(b, o, 2);
  } else if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    str_addn(b, o, 3);
  } else {
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    str_addn(b, o, 4);
  }
}

/* A string starting at the opening quote; returns its decoded value or NULL. */
static char* jstring(JParser* q) {
  const char* start = q->p++;
  Str b = {0};
  str_add(&b, "");
  for (;;) {
    unsigned char c = (unsigned char)*q->p;
    if (c == 0) {
      jerror(q, "Unterminated string starting at", start);
      return NULL;
    }
    if (c == '"') {
      ++q->p;
      return b.s;
    }
    if (c < 0x20) {
      jerror(q, "Invalid control character at", q->p);
      return NULL;
    }
    if (c != '\\') {
      str_addn(&b, q->p++, 1);
      continue;
    }
    const char* esc = q->p;
    char e = q->p[1];
    const char* simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      static const char out[] = "\"\\/\b\f\n\r\t";
      str_addn(&b, &out[simple - "\"\\/bfnrt"], 1);
      q->p += 2;
      continue;
    }
    if (e != 'u') {
      jerror(q, "Invalid \\escape", esc);
      return NULL;
    }
    unsigned cp;
    if (!hex4(q->p + 2, &cp)) {
      jerror(q, "Invalid \\uXXXX escape", esc + 1);
      return NULL;
    }
    q->p += 6;
    unsigned low;
    if (cp >= 0xD800 && cp < 0xDC00 && q->p[0] == '\\' && q->p[1] == 'u' && hex4(q->p + 2, &low) &&
        low >= 0xDC00 && low < 0xE000) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      q->p += 6;
    }
    utf8(&b, cp);
  }
}

static Json* jvalue(JParser* q);

static Json* jcontainer(JParser* q, int object) {
  const char* start = q->p++;
  Json* j = jnew(object ? J_OBJECT : J_ARRAY);
  size_t cap = 0;
  if (++q->depth > 256) return jerror(q, "Nesting too deep at", start);
  jskip(q);
  char close = object ? '}' : ']';
  if (*q->p == close) {
    ++q->p;
  } else {
    for (;;) {
      char* key = NULL;
      if (object) {
        jskip(q);
        if (*q->p != '"') {
          return jerror(q, "Expecting property name enclosed in double quotes", q->p);
        }
        if (!(key = jstring(q))) return NULL;
        jskip(q);
        if (*q->p != ':') return jerror(q, "Expecting ':' delimiter", q->p);
        ++q->p;
      }
      Json* v = jvalue(q);
      if (!v) return NULL;
      if (j->n == cap) {
        cap = cap ? cap * 2 : 4;
        Json** items = xmalloc(cap * sizeof *items);
        char** keys = xmalloc(cap * sizeof *keys);
        if (j->n) {
          memcpy(items, j->items, j->n * sizeof *items);
          memcpy(keys, j->keys, j->n * sizeof *keys);
        }
        j->items = items;
        j->keys = keys;
      }
      j->keys[j->n] = key;
      j->items[j->n++] = v;
      jskip(q);
      if (*q->p == close) {
        ++q->p;
        break;
      }
      if (*q->p != ',') return jerror(q, "Expecting ',' delimiter", q->p);
      ++q->p;
    }
  }
  --q->depth;
  j->text = xstrndup(start, (size_t)(q->p - start));
  return j;
}

static Json* jvalue(JParser* q) {
  jskip(q);
  const char* p = q->p;
  static const struct {
    const char* word;
    JType type;
  } words[] = {{"null", J_NULL},  {"true", J_TRUE},       {"false", J_FALSE},
               {"NaN", J_NUMBER}, {"Infinity", J_NUMBER}, {"-Infinity", J_NUMBER}};
  for (size_t i = 0; i < sizeof words / sizeof *words; ++i) {
    size_t n = strlen(words[i].word);
    if (strncmp(p, words[i].word, n) == 0) {
      Json* j = jnew(words[i].type);
      j->text = xstrndup(p, n);
      q->p += n;
      return j;
    }
  }
  if (*p == '"') {
    char* s = jstring(q);
    if (!s) return NULL;
    Json* j = jnew(J_STRING);
    j->text = s;
    return j;
  }
  if (*p == '{' || *p == '[') return jcontainer(q, *p == '{');
  /* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? */
  const char* e = p;
  if (*e == '-') ++e;
  if (*e == '0') {
    ++e;
  } else if (*e >= '1' && *e <= '9') {
    while (is_digit(*e)) ++e;
  } else {
    return jerror(q, "Expecting value", p);
  }
  if (*e == '.' && is_digit(e[1])) {
    e += 2;
    while (is_digit(*e)) ++e;
  }
  if ((*e == 'e' || *e == 'E') &&
      (is_digit(e[1]) || ((e[1] == '-' || e[1] == '+') && is_digit(e[2])))) {
    e += 2;
    while (is_digit(*e)) ++e;
  }
  Json* j = jnew(J_NUMBER);
  j->text = xstrndup(p, (size_t)(e - p));
  q->p = e;
  return j;
}

/* Parses a whole document; NULL with *error set ("<what>: line L column C (char N)"). */
static Json* json_parse(const char* doc, char** error) {
  JParser q = {doc, doc, NULL, NULL, 0};
  Json* j = jvalue(&q);
  if (j) {
    jskip(&q);
    if (*q.p) j = jerror(&q, "Extra data", q.p);
  }
  if (!j) {
    size_t pos = char_count(doc, (size_t)(q.error_at - doc));
    size_t line = 1, line_start = 0;
    for (const char* c = doc; c < q.error_at; ++c) {
      if (*c == '\n') {
        ++line;
        line_start = char_count(doc, (size_t)(c - doc)) + 1;
      }
    }
    *error = fmt("%s: line %zu column %zu (char %zu)", q.error, line, pos - line_start + 1, pos);
  }
  return j;
}

/* obj.get(key): the last value of that key (as Python's dict keeps), or NULL. */
static Json* json_get(const Json* obj, const char* key) {
  Json* found = NULL;
  for (size_t i = 0; i < obj->n; ++i) {
    if (strcmp(obj->keys[i], key) == 0) found = obj->items[i];
  }
  return found;
}

/* Python's truth value of a JSON value. */
static int json_truthy(const Json* j) {
  switch (j->type) {
    case J_NULL:
    case J_FALSE:
      return 0;
    case J_TRUE:
      return 1;
    case J_NUMBER:
      return strtod(j->text, NULL) != 0 || strcmp(j->text, "NaN") == 0;
    case J_STRING:
      return j->text[0] != 0;
    default:
      return j->n > 0;
  }
}

/* Python's str() of a JSON value (strings as they are, true as True, ...). */
static const char* json_str(const Json* j) {
  switch (j->type) {
    case J_NULL:
      return "None";
    case J_FALSE:
      return "False";
    case J_TRUE:
      return "True";
    default:
      return j->text;
  }
}

/* ---- configuration -------------------------------------------------------------------------- */

typedef struct {
  char* role;
  char** addresses;
  size_t n;
} Role;

typedef struct {
  Role* roles;
  size_t n;
} Cluster;

typedef struct {
  Cluster cluster;
  char* role;
  long index;
  const char* source;
  char* tf_config; /* TF_CONFIG as given (exported unchanged), or NULL to build it */
} Topology;

static Role* cluster_role(const Cluster* c, const char* role) {
  for (size_t i = 0; i < c->n; ++i) {
    if (strcmp(c->roles[i].role, role) == 0) return &c->roles[i];
  }
  return NULL;
}

/* Adds a role (or replaces the addresses of one already there, keeping its place). */
static Role* cluster_put(Cluster* c, const char* role) {
  Role* r = cluster_role(c, role);
  if (r) return r;
  Role* roles = xmalloc((c->n + 1) * sizeof *roles);
  if (c->n) memcpy(roles, c->roles, c->n * sizeof *roles);
  c->roles = roles;
  r = &c->roles[c->n++];
  r->role = xstrdup(role);
  r->addresses = NULL;
  r->n = 0;
  return r;
}

static void role_add(Role* r, char* address) {
  char** a = xmalloc((r->n + 1) * sizeof *a);
  if (r->n) memcpy(a, r->addresses, r->n * sizeof *a);
  r->addresses = a;
  r->addresses[r->n++] = address;
}

/* The order roles are listed in: chief, ps, worker, evaluator, then the others sorted. */
static const char* const ROLE_ORDER[] = {"chief", "ps", "worker", "evaluator"};

static int role_rank(const char* role) {
  for (int i = 0; i < 4; ++i) {
    if (strcmp(role, ROLE_ORDER[i]) == 0) return i;
  }
  return 4;
}

static const Cluster* sort_cluster;

static int compare_roles(const void* a, const void* b) {
  const Role* x = &sort_cluster->roles[*(const size_t*)a];
  const Role* y = &sort_cluster->roles[*(const size_t*)b];
  int rx = role_rank(x->role), ry = role_rank(y->role);
  if (rx != ry) return rx - ry;
  return strcmp(x->role, y->role);
}

/* The indexes of c->roles in role order. */
static size_t* ordered_roles(const Cluster* c) {
  size_t* order = xmalloc(c->n * sizeof *order);
  for (size_t i = 0; i < c->n; ++i) order[i] = i;
  sort_cluster = c;
  qsort(order, c->n, sizeof *order, compare_roles);
  return order;
}

static char* role_list(const Cluster* c) {
  size_t* order = ordered_roles(c);
  Str b = {0};
  str_add(&b, "");
  for (size_t i = 0; i < c->n; ++i) {
    if (i) str_add(&b, ", ");
    str_add(&b, c->roles[order[i]].role);
  }
  free(order);
  return b.s;
}

/* "host:port" (or "[v6]:port") -> host and port; NULL host on error. */
static char* split_address(const char* address, int* port) {
  char* text = strip(address);
  char* colon = strrchr(text, ':');
  if (!colon) return NULL;
  *colon = 0;
  char *host = text, *port_text = colon + 1;
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    host[n - 1] = 0;
    ++host;
  }
  if (!*host || !all_digits(port_text)) return NULL;
  long p = digits_value(port_text, 65535);
  if (p <= 0) return NULL;
  *port = (int)p;
  return host;
}

/* Checks a role's addresses (host:port each). */
static int check_role(const Role* r, const char* where) {
  for (size_t k = 0; k < r->n; ++k) {
    int port;
    if (!split_address(r->addresses[k], &port)) {
      return config_fail("%s: %s-%zu: bad address %s: expected host:port", where, r->role, k,
                         py_repr(r->addresses[k]));
    }
  }
  return 0;
}

/* A cluster map from JSON (TF_CONFIG's "cluster", or TF_CLUSTER), checked role by role. */
static int cluster_from_json(const Json* j, const char* where, Cluster* out) {
  if (!j || j->type != J_OBJECT || j->n == 0) {
    return config_fail("%s: the cluster must be a non-empty map of role -> addresses", where);
  }
  /* Duplicate keys: the last value counts, at the first one's place (Python's dict). */
  for (size_t i = 0; i < j->n; ++i) cluster_put(out, j->keys[i]);
  for (size_t i = 0; i < out->n; ++i) {
    Role* r = &out->roles[i];
    const Json* list = json_get(j, r->role);
    int ok = list->type == J_ARRAY;
    for (size_t k = 0; ok && k < list->n; ++k) ok = list->items[k]->type == J_STRING;
    if (!ok) {
      return config_fail("%s: role %s must list its addresses as strings", where, py_repr(r->role));
    }
    for (size_t k = 0; k < list->n; ++k) role_add(r, list->items[k]->text);
    if (check_role(r, where)) return -1;
  }
  return 0;
}

static int parse_json(const char* text, const char* where, Json** out) {
  char* error = NULL;
  *out = json_parse(text, &error);
  if (!*out) return config_fail("%s is not valid JSON: %s", where, error);
  return 0;
}

/* The seed's CLUSTER_SPEC: "ps|h0:2222;h1:2222,worker|h0:2222". */
static int parse_cluster_spec(const char* spec, Cluster* out) {
  char* text = strip(spec);
  char* part = text;
  for (;;) {
    char* end = strchr(part, ',');
    if (end) *end = 0;
    char* entry = strip(part);
    char* bar = strchr(entry, '|');
    char* role = NULL;
    if (bar) {
      *bar = 0;
      role = strip(entry);
    }
    if (!bar || !*role) {
      return config_fail("CLUSTER_SPEC: bad entry %s: expected role|host:port;host:port",
                         py_repr(part));
    }
    if (cluster_role(out, role)) {
      return config_fail("CLUSTER_SPEC: role %s appears twice", py_repr(role));
    }
    Role* r = cluster_put(out, role);
    char* addresses = bar + 1;
    for (;;) {
      char* semi = strchr(addresses, ';');
      if (semi) *semi = 0;
      char* a = strip(addresses);
      if (*a) role_add(r, a);
      if (!semi) break;
      addresses = semi + 1;
    }
    if (!end) break;
    part = end + 1;
  }
  for (size_t i = 0; i < out->n; ++i) {
    if (check_role(&out->roles[i], "CLUSTER_SPEC")) return -1;
  }
  return 0;
}

/* A non-negative replica index. */
static int parse_index(const char* given, const char* where, long* index) {
  char* text = strip(given);
  if (!all_digits(text) || (*index = digits_value(text, INT_MAX)) < 0) {
    return config_fail("%s: bad task index %s", where, py_repr(text));
  }
  return 0;
}

/* The replica index: the last '-'-separated field of the hostname ("c-worker-2" -> 2; a
 * domain part is ignored). */
static int index_from_hostname(const char* hostname, long* index) {
  char* short_name = strip(hostname);
  char* dot = strchr(short_name, '.');
  if (dot) *dot = 0;
  char* dash = strrchr(short_name, '-');
  char* field = dash ? dash + 1 : short_name;
  if (!all_digits(field) || (*index = digits_value(field, INT_MAX)) < 0) {
    return config_fail(
        "cannot find the replica index in the hostname %s "
        "(expected <name>-<role>-<index>)",
        py_repr(hostname));
  }
  return 0;
}

static const char* env(const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

/* This replica's topology from its environment. Precedence: TF_CONFIG, else TF_CLUSTER, else
 * CLUSTER_SPEC; with the last two the role is RESOURCE_NAME and the index TASK_INDEX or else
 * the hostname's. */
static int resolve_topology(const char* hostname, Topology* t) {
  memset(t, 0, sizeof *t);
  char* tf_config = strip(env("TF_CONFIG"));
  char* role = strip(env("RESOURCE_NAME"));
  int have_index = 0;
  if (*tf_config) {
    Json* config;
    if (parse_json(tf_config, "TF_CONFIG", &config)) return -1;
    if (config->type != J_OBJECT) return config_fail("TF_CONFIG must be a JSON object");
    if (cluster_from_json(json_get(config, "cluster"), "TF_CONFIG", &t->cluster)) return -1;
    Json* task = json_get(config, "task");
    if (task && json_truthy(task)) {
      if (task->type != J_OBJECT) return config_fail("TF_CONFIG: task must be an object");
      Json* type = json_get(task, "type");
      if (type && json_truthy(type)) role = xstrdup(json_str(type));
      Json* index = json_get(task, "index");
      if (index && index->type != J_NULL) {
        if (parse_index(json_str(index), "TF_CONFIG", &t->index)) return -1;
        have_index = 1;
      }
    }
    t->source = "TF_CONFIG";
    t->tf_config = tf_config;
  } else if (*strip(env("TF_CLUSTER"))) {
    Json* cluster;
    if (parse_json(env("TF_CLUSTER"), "TF_CLUSTER", &cluster)) return -1;
    if (cluster_from_json(cluster, "TF_CLUSTER", &t->cluster)) return -1;
    t->source = "TF_CLUSTER";
  } else if (*strip(env("CLUSTER_SPEC"))) {
    if (parse_cluster_spec(env("CLUSTER_SPEC"), &t->cluster)) return -1;
    t->source = "CLUSTER_SPEC";
  } else {
    return config_fail("no cluster configuration: set TF_CONFIG, TF_CLUSTER or CLUSTER_SPEC");
  }
  if (!*role) {
    return config_fail("%s gives no role: set the task type or RESOURCE_NAME", t->source);
  }
  t->role = role;
  if (!have_index) {
    if (*strip(env("TASK_INDEX"))) {
      if (parse_index(env("TASK_INDEX"), "TASK_INDEX", &t->index)) return -1;
    } else if (index_from_hostname(hostname, &t->index)) {
      return -1;
    }
  }
  const Role* r = cluster_role(&t->cluster, role);
  if (r) {
    if ((size_t)t->index >= r->n) {
      return config_fail("%s: %s-%ld is out of range: the cluster has %zu %s replica(s)", t->source,
                         role, t->index, r->n, role);
    }
  } else if (strcmp(role, "evaluator") != 0) {
    return config_fail("%s: role %s is not in the cluster (roles: %s)", t->source, py_repr(role),
                       role_list(&t->cluster));
  }
  return 0;
}

/* TF_CONFIG for the program: the one given, or TensorFlow's format built from the cluster,
 * role and index (as Python's json.dumps writes it). */
static char* tf_config_json(const Topology* t) {
  if (t->tf_config) return t->tf_config;
  Str b = {0};
  str_add(&b, "{\"cluster\": {");
  for (size_t i = 0; i < t->cluster.n; ++i) {
    const Role* r = &t->cluster.roles[i];
    if (i) str_add(&b, ", ");
    json_string(&b, r->role);
    str_add(&b, ": [");
    for (size_t k = 0; k < r->n; ++k) {
      if (k) str_add(&b, ", ");
      json_string(&b, r->addresses[k]);
    }
    str_add(&b, "]");
  }
  str_add(&b, "}, \"task\": {\"type\": ");
  json_string(&b, t->role);
  str_addf(&b, ", \"index\": %ld}, \"environment\": \"cloud\"}", t->index);
  return b.s;
}

/* A non-negative number of seconds from the environment. */
static int env_seconds(const char* name, double fallback, double* out) {
  char* text = strip(env(name));
  if (!*text) {
    *out = fallback;
    return 0;
  }
  char* end;
  errno = 0;
  double value = strtod(text, &end);
  /* Python's float(): decimal only (no hex), the whole text. */
  if (*end || end == text || strpbrk(text, "xXpP") || !(value >= 0) || isinf(value)) {
    return config_fail("%s=%s: expected a number of seconds >= 0", name, py_repr(text));
  }
  *out = value;
  return 0;
}

/* ---- signals -------------------------------------------------------------------------------- */

static volatile sig_atomic_t first_signal; /* the first of SIGTERM/SIGINT/SIGHUP received */
static volatile pid_t child_pid;           /* the program, once it runs (0: none) */
static const int FORWARDED[] = {SIGTERM, SIGINT, SIGHUP};

static void on_signal(int signum) {
  int saved = errno;
  if (!first_signal) first_signal = signum;
  if (child_pid > 0) kill(child_pid, signum);
  errno = saved;
}

static void forwarded_set(sigset_t* set) {
  sigemptyset(set);
  for (int i = 0; i < 3; ++i) sigaddset(set, FORWARDED[i]);
}

static void install_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(FORWARDED[i], &sa, NULL);
  /* A closed stderr must not kill the launcher (the child gets SIGPIPE's default back). */
  signal(SIGPIPE, SIG_IGN);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the start-up barrier ------------------------------------------------------------------- */

typedef struct {
  char* name;    /* "worker-1" */
  char* address; /* as given */
  int reached;
  int holding;                /* reached a placeholder: the peer was still in its barrier */
  struct sockaddr_storage ip; /* the address reached (its port is ignored) */
  char reason[200];           /* "" while no attempt has failed */
} Peer;

static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
/* At most this many probes at once: a large cluster's peers are not all looked up in one burst
 * of DNS queries (which a resolver may drop, so that the first peers would wait for a retry). */
enum { MAX_PROBES = 16 };
static sem_t probe_slots;

/* A short reason for a failed connect. */
static void connect_error(int e, char* out, size_t n) {
  const char* text;
  switch (e) {
    case ECONNREFUSED:
      text = "connection refused";
      break;
    case EHOSTUNREACH:
      text = "no route to host";
      break;
    case ENETUNREACH:
      text = "network unreachable";
      break;
    case ETIMEDOUT:
      text = "connection timed out";
      break;
    case ECONNRESET:
      text = "connection reset";
      break;
    default:
      text = error_text(e);
  }
  snprintf(out, n, "%s", text);
  for (char* c = out; *c; ++c) {
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
  }
}

/* Whether a connected socket is closed by the other end at once, as a placeholder does. */
static int closed_at_once(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  int r;
  do r = poll(&p, 1, PLACEHOLDER_WAIT_MS);
  while (r < 0 && errno == EINTR);
  if (r <= 0) return 0;
  char byte;
  ssize_t got = recv(fd, &byte, 1, MSG_DONTWAIT);
  return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* The connected socket when `address` resolves and accepts a TCP connection (`*ip`: the
 * address reached), else -1 and why not. */
static int probe(const char* address, char* reason, size_t n, struct sockaddr_storage* ip) {
  int port;
  char* host = split_address(address, &port);
  if (!host) {
    snprintf(reason, n, "bad address");
    return -1;
  }
  char service[8];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints, *infos = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  snprintf(reason, n, "does not resolve");
  if (getaddrinfo(host, service, &hints, &infos) != 0) return -1;
  int connected = -1;
  for (struct addrinfo* ai = infos; ai && connected < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      connect_error(errno, reason, n);
      continue;
    }
    int e = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      e = errno;
      if (e == EINPROGRESS || e == EINTR) {
        struct pollfd p = {fd, POLLOUT, 0};
        int r;
        do r = poll(&p, 1, CONNECT_TIMEOUT_MS);
        while (r < 0 && errno == EINTR);
        if (r == 0) {
          e = ETIMEDOUT;
        } else {
          socklen_t len = sizeof e;
          if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) e = errno;
        }
      }
    }
    if (e == 0) {
      connected = fd;
      memset(ip, 0, sizeof *ip);
      memcpy(ip, ai->ai_addr, ai->ai_addrlen < sizeof *ip ? ai->ai_addrlen : sizeof *ip);
    } else {
      connect_error(e, reason, n);
      close(fd);
    }
  }
  freeaddrinfo(infos);
  return connected;
}

/* Probes one peer until it answers once; keeps the last reason. */
static void* watch_peer(void* arg) {
  Peer* peer = arg;
  char reason[sizeof peer->reason];
  struct sockaddr_storage ip;
  for (;;) {
    while (sem_wait(&probe_slots) != 0 && errno == EINTR) {
    }
    int fd = probe(peer->address, reason, sizeof reason, &ip);
    sem_post(&probe_slots);
    /* Told apart outside the probe slots: a program's answer takes PLACEHOLDER_WAIT_MS. */
    int ok = fd >= 0, holding = ok && closed_at_once(fd);
    if (ok) close(fd);
    pthread_mutex_lock(&peers_lock);
    if (ok) {
      peer->reached = 1;
      peer->holding = holding;
      peer->ip = ip;
    } else {
      memcpy(peer->reason, reason, sizeof reason);
    }
    pthread_mutex_unlock(&peers_lock);
    if (ok) return NULL;
    struct timespec pause = {0, RETRY_INTERVAL_NS};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
  }
}

/* "a, b, c" cut to about `limit` characters with "and N more". */
static char* peer_list(char** items, size_t n, long limit) {
  Str b = {0};
  str_add(&b, "");
  long used = 0;
  for (size_t i = 0; i < n; ++i) {
    long len = (long)char_count(items[i], strlen(items[i]));
    if (i && used + len + 2 > limit) {
      str_addf(&b, ", and %zu more", n - i);
      break;
    }
    if (i) str_add(&b, ", ");
    str_add(&b, items[i]);
    used += len + 2;
  }
  return b.s;
}

/* "worker-1 (host:port: reason)" for every peer not reached yet, in order. */
static size_t missing_peers(Peer* peers, size_t n, char** out) {
  size_t count = 0;
  pthread_mutex_lock(&peers_lock);
  for (size_t i = 0; i < n; ++i) {
    if (peers[i].reached) continue;
    out[count++] = fmt("%s (%s: %s)", peers[i].name, peers[i].address,
                       peers[i].reason[0] ? peers[i].reason : "no answer yet");
  }
  pthread_mutex_unlock(&peers_lock);
  return count;
}

/* Listens on the replica's own port; -1 and why not. */
static int open_listener(int port, const char** why) {
  *why = "no address family";
  for (int family = 0; family < 2; ++family) {
    int fd = socket(family ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      *why = error_text(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    v4.sin_family = AF_INET;
    v4.sin_port = htons((unsigned short)port);
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons((unsigned short)port);
    int r = family ? bind(fd, (struct sockaddr*)&v6, sizeof v6)
                   : bind(fd, (struct sockaddr*)&v4, sizeof v4);
    if (r == 0 && listen(fd, 128) == 0) return fd;
    *why = error_text(errno);
    close(fd);
  }
  return -1;
}

/* An IP address: IPv4 as 4 bytes, IPv6 as 16. */
typedef struct {
  unsigned char bytes[16];
  size_t n;
} Ip;
/* The IP addresses of the connections the placeholder accepted, each with how many came from
 * it (each peer's probe stops once it is accepted, so replicas sharing an address, as on one
 * host, are counted apart): read and written by the main thread only. */
typedef struct {
  Ip ip;
  size_t count;
} Seen;
static Seen* seen;
static size_t seen_n, seen_cap;

/* The IP of a socket address; an IPv4-mapped IPv6 address reads as the IPv4 one. */
static Ip ip_of(const struct sockaddr_storage* a) {
  Ip ip;
  memset(&ip, 0, sizeof ip);
  if (a->ss_family == AF_INET) {
    memcpy(ip.bytes, &((const struct sockaddr_in*)a)->sin_addr, 4);
    ip.n = 4;
  } else if (a->ss_family == AF_INET6) {
    const unsigned char* b = ((const struct sockaddr_in6*)a)->sin6_addr.s6_addr;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(b, mapped, 12) == 0) {
      memcpy(ip.bytes, b + 12, 4);
      ip.n = 4;
    } else {
      memcpy(ip.bytes, b, 16);
      ip.n = 16;
    }
  }
  return ip;
}

static int same_ip(Ip a, Ip b) { return a.n == b.n && memcmp(a.bytes, b.bytes, a.n) == 0; }

/* How many accepted connections came from `ip`. */
static size_t seen_from(Ip ip) {
  for (size_t i = 0; i < seen_n; ++i) {
    if (same_ip(seen[i].ip, ip)) return seen[i].count;
  }
  return 0;
}

static void remember(const struct sockaddr_storage* a) {
  Ip ip = ip_of(a);
  if (ip.n == 0) return;
  for (size_t i = 0; i < seen_n; ++i) {
    if (same_ip(seen[i].ip, ip)) {
      ++seen[i].count;
      return;
    }
  }
  if (seen_n == seen_cap) {
    seen_cap = seen_cap ? 2 * seen_cap : 16;
    seen = realloc(seen, seen_cap * sizeof *seen);
    if (!seen) {
      fprintf(stderr, PREFIX "out of memory\n");
      exit(EXIT_CONFIG);
    }
  }
  seen[seen_n].ip = ip;
  seen[seen_n++].count = 1;
}

/* Waits up to `seconds`, accepting and closing every connection to the listener meanwhile. */
static void serve_for(int listener, double seconds) {
  int ms = (int)ceil(seconds * 1000);
  if (ms < 0) ms = 0;
  if (listener < 0) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return;
  }
  struct pollfd p = {listener, POLLIN, 0};
  if (poll(&p, 1, ms) > 0) {
    for (;;) {
      struct sockaddr_storage from;
      socklen_t len = sizeof from;
      int fd = accept4(listener, (struct sockaddr*)&from, &len, SOCK_CLOEXEC);
      if (fd < 0) break;
      remember(&from);
      close(fd);
    }
  }
}

/* "worker-1" for every peer that was still in its barrier when this replica reached it and has
 * not reached this replica since: the k-th such peer of an address is missing while fewer than k
 * connections came from that address. */
static size_t peers_still_holding(Peer* peers, size_t n, char** out) {
  size_t count = 0;
  pthread_mutex_lock(&peers_lock);
  for (size_t i = 0; i < n; ++i) {
    if (!peers[i].holding) continue;
    Ip ip = ip_of(&peers[i].ip);
    size_t rank = 1;
    for (size_t j = 0; j < i; ++j) {
      if (peers[j].holding && same_ip(ip_of(&peers[j].ip), ip)) ++rank;
    }
    if (seen_from(ip) < rank) out[count++] = peers[i].name;
  }
  pthread_mutex_unlock(&peers_lock);
  return count;
}

/* After the barrier: keeps the placeholder open until every peer still in its own barrier has
 * reached this replica, at most `linger` seconds. -1, or an exit code on a signal. */
static int hold_for_peers(const char* name, int listener, Peer* peers, size_t n, double linger,
                          double report_every, char** names) {
  double start = now(), next_report = start + report_every;
  for (;;) {
    size_t m = peers_still_holding(peers, n, names);
    double t_now = now();
    if (m == 0) return -1;
    if (first_signal) return 128 + first_signal;
    if (t_now - start >= linger) {
      say("%s starts its program without hearing from %zu peer(s) after %g s: %s", name, m, linger,
          peer_list(names, m, 2000));
      return -1;
    }
    if (t_now >= next_report) {
      say("%s waits for %zu peer(s) still in their barrier to reach it: %s", name, m,
          peer_list(names, m, 2000));
      next_report = t_now + report_every;
    }
    double left = start + linger - t_now;
    serve_for(listener, left < 0.1 ? left : 0.1);
  }
}

/* The start-up barrier: -1 once every peer answered, or an exit code. */
static int run_barrier(const Topology* t, double timeout, double report_every, double linger) {
  char* name = fmt("%s-%ld", t->role, t->index);
  size_t* order = ordered_roles(&t->cluster);
  size_t total = 0;
  for (size_t i = 0; i < t->cluster.n; ++i) total += t->cluster.roles[i].n;
  Peer* peers = xmalloc((total ? total : 1) * sizeof *peers);
  size_t n = 0;
  for (size_t i = 0; i < t->cluster.n; ++i) {
    const Role* r = &t->cluster.roles[order[i]];
    for (size_t k = 0; k < r->n; ++k) {
      if (strcmp(r->role, t->role) == 0 && (long)k == t->index) continue;
      memset(&peers[n], 0, sizeof peers[n]);
      peers[n].name = fmt("%s-%zu", r->role, k);
      peers[n].address = r->addresses[k];
      ++n;
    }
  }
  if (n == 0) {
    /* A cluster of one: nobody to wait for, nobody waiting (so no placeholder either). */
    say("%s passed the start-up barrier in 0.0 s (0 peers)", name);
    return -1;
  }
  int listener = -1;
  const Role* own_role = cluster_role(&t->cluster, t->role);
  if (own_role && (size_t)t->index < own_role->n) {
    int port = 0;
    split_address(own_role->addresses[t->index], &port);
    const char* why;
    listener = open_listener(port, &why);
    if (listener < 0) {
      say("%s cannot listen on port %d during the barrier (%s); waiting anyway", name, port, why);
    }
  }
  double start = now();
  say("%s (%s) waiting for %zu peer(s), timeout %g s", name, t->source, n, timeout);
  /* The probing threads never take the forwarded signals: the main thread handles them. */
  sigset_t forwarded, old;
  forwarded_set(&forwarded);
  pthread_sigmask(SIG_BLOCK, &forwarded, &old);
  sem_init(&probe_slots, 0, MAX_PROBES);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  for (size_t i = 0; i < n; ++i) {
    pthread_t thread;
    int e = pthread_create(&thread, &attr, watch_peer, &peers[i]);
    if (e != 0) {
      pthread_sigmask(SIG_SETMASK, &old, NULL);
      return fail(fmt("tfk8s: cannot start the start-up barrier: %s", error_text(e)), EXIT_CONFIG);
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  double next_report = start + report_every;
  char** missing = xmalloc(n * sizeof *missing);
  int code = -1;
  for (;;) {
    size_t m = missing_peers(peers, n, missing);
    double t_now = now();
    if (m == 0) break;
    if (first_signal) {
      say("%s got %s during the start-up barrier; exiting", name, signal_name(first_signal));
      code = 128 + first_signal;
      break;
    }
    if (t_now - start >= timeout) {
      char* head =
          fmt("tfk8s: start-up barrier timed out after %g s; unreachable peers: ", timeout);
      long limit = TERMINATION_MESSAGE_LIMIT - 200 - (long)strlen(head);
      code = fail(fmt("%s%s", head, peer_list(missing, m, limit)), EXIT_BARRIER);
      break;
    }
    if (t_now >= next_report) {
      say("%s waiting for %zu of %zu peers after %d s: %s", name, m, n, (int)(t_now - start),
          peer_list(missing, m, 2000));
      next_report = t_now + report_every;
    }
    double wait = start + timeout - t_now;
    serve_for(listener, wait < 0.1 ? (wait > 0 ? wait : 0) : 0.1);
    for (size_t i = 0; i < m; ++i) free(missing[i]);
  }
  if (code < 0) {
    say("%s passed the start-up barrier in %.1f s (%zu peers)", name, now() - start, n);
    if (listener >= 0 && linger > 0)
      code = hold_for_peers(name, listener, peers, n, linger, report_every, missing);
  }
  if (listener >= 0) close(listener);
  return code;
}

/* ---- incarnations: each start's output kept on the shared volume ---------------------------- */

/* With TFK8S_LOG_DIR (tfk8s sets it to <storage>/.tfk8s/<cluster>/logs when the cluster has
 * shared storage), every start of a replica is an incarnation: everything it prints (the
 * launcher's lines and the program's stdout and stderr) also goes to
 * DIR/<role>-<index>.<n>.log, at most TFK8S_LOG_LIMIT bytes (default 16 MiB). A new incarnation
 * first prints the end of each earlier one's file (its last 64 KiB, every line prefixed
 * "[incarnation N] "), so the replica's log -- what `kubectl logs` and TFCluster::Logs read --
 * also holds what the replica said before it was lost with its node, whose kubelet can no longer
 * tell. A program that exits 0 removes the replica's files: that replica's run is over. Keeping
 * the output never fails the replica: a directory that cannot be written is reported, once. */
enum { REPLAY_TAIL = 64 * 1024, REPLAY_MOST = 8, DRAIN_SECONDS = 2 };

static char* kept_dir;  /* TFK8S_LOG_DIR while this incarnation keeps its output */
static char* kept_name; /* "worker-1" */

static int make_dirs(const char* path) {
  char* p = xstrdup(path);
  for (char* c = p + 1;; ++c) {
    if (*c != '/' && *c != 0) continue;
    char saved = *c;
    *c = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      int e = errno;
      free(p);
      errno = e;
      return -1;
    }
    *c = saved;
    if (!saved) {
      free(p);
      return 0;
    }
  }
}

static int compare_longs(const void* a, const void* b) {
  long x = *(const long*)a, y = *(const long*)b;
  return (x > y) - (x < y);
}

/* The incarnation numbers of `name` in `dir` (ascending); *n is set to how many. */
static long* incarnations(const char* dir, const char* name, size_t* n) {
  *n = 0;
  DIR* d = opendir(dir);
  if (!d) return NULL;
  size_t cap = 8, len = strlen(name);
  long* out = xmalloc(cap * sizeof *out);
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    const char* f = e->d_name;
    if (strncmp(f, name, len) != 0 || f[len] != '.') continue;
    char* end;
    long k = strtol(f + len + 1, &end, 10);
    if (end == f + len + 1 || k <= 0 || strcmp(end, ".log") != 0) continue;
    if (*n == cap) {
      cap *= 2;
      long* grown = xmalloc(cap * sizeof *grown);
      memcpy(grown, out, *n * sizeof *out);
      out = grown;
    }
    out[(*n)++] = k;
  }
  closedir(d);
  qsort(out, *n, sizeof *out, compare_longs);
  return out;
}

static char* incarnation_path(long k) { return fmt("%s/%s.%ld.log", kept_dir, kept_name, k); }

/* Prints the end of incarnation k's file on stderr (with the launcher's lines about it, so the
 * two never interleave), each line prefixed. */
static void replay(long k) {
  int fd = open(incarnation_path(k), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return;
  }
  off_t from = st.st_size > REPLAY_TAIL ? st.st_size - REPLAY_TAIL : 0;
  char* buf = xmalloc(REPLAY_TAIL + 1);
  size_t got = 0;
  ssize_t r;
  while (got < REPLAY_TAIL &&
         (r = pread(fd, buf + got, REPLAY_TAIL - got, from + (off_t)got)) != 0) {
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    got += (size_t)r;
  }
  close(fd);
  buf[got] = 0;
  char* line = buf;
  if (from > 0) { /* a cut line is dropped */
    char* nl = strchr(buf, '\n');
    line = nl ? nl + 1 : buf + got;
  }
  char when[32] = "?";
  struct tm tm;
  if (gmtime_r(&st.st_mtime, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  Str out = {0};
  str_addf(&out, PREFIX "%s incarnation %ld said%s (its last output at %s):\n", kept_name, k,
           from > 0 ? ", the last 64 KiB" : "", when);
  while (*line) {
    char* nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line) : strlen(line);
    str_addf(&out, "[incarnation %ld] ", k);
    str_addn(&out, line, n);
    str_add(&out, "\n");
    line += n + (nl != NULL);
  }
  write_all(2, out.s, out.n);
  free(out.s);
  free(buf);
}

/* Opens this incarnation's file (the next number) and replays the earlier ones; returns how
 * many earlier incarnations there were. */
static size_t start_incarnation(const char* name) {
  const char* dir = env("TFK8S_LOG_DIR");
  if (!*dir) return 0;
  const char* limit = env("TFK8S_LOG_LIMIT");
  long bytes = all_digits(limit) ? digits_value(limit, LONG_MAX / 2) : -1;
  if (bytes < 0 && *limit) say("TFK8S_LOG_LIMIT=%s is not a number of bytes: 16 MiB kept", limit);
  kept_limit = bytes >= 0 ? (size_t)bytes : 16u << 20;
  kept_dir = xstrdup(dir);
  kept_name = xstrdup(name);
  size_t n = 0;
  long* earlier = NULL;
  int fd = -1;
  long k = 0;
  if (make_dirs(dir) == 0) {
    earlier = incarnations(dir, name, &n);
    k = n ? earlier[n - 1] : 0;
    do {
      ++k;
      fd = open(incarnation_path(k), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0664);
    } while (fd < 0 && errno == EEXIST);
  }
  if (fd < 0) {
    say("cannot keep %s's output in %s: %s", name, dir, error_text(errno));
    kept_dir = NULL;
    return n;
  }
  if (n > 0) {
    say("%s is incarnation %ld: what the earlier ones said follows (kept in %s)", name, k, dir);
    if (n > REPLAY_MOST) say("(the %zu oldest are left out)", n - REPLAY_MOST);
    for (size_t i = n > REPLAY_MOST ? n - REPLAY_MOST : 0; i < n; ++i) replay(earlier[i]);
    say("%s incarnation %ld starts", name, k);
  }
  kept_fd = fd;
  return n;
}

/* The program exited 0: the replica's run is over, and so are its kept files. */
static void forget_incarnations(void) {
  if (!kept_dir) return;
  pthread_mutex_lock(&kept_lock);
  if (kept_fd >= 0) close(kept_fd);
  kept_fd = -1;
  pthread_mutex_unlock(&kept_lock);
  size_t n = 0;
  long* all = incarnations(kept_dir, kept_name, &n);
  for (size_t i = 0; i < n; ++i) unlink(incarnation_path(all[i]));
}

/* ---- the program ---------------------------------------------------------------------------- */

/* Starts argv[0] (looked up in the PATH of `envp` when it has no '/', as Python's subprocess
 * does) with `envp`; returns its pid, or -1 with *error set to why exec failed. With `quiet`
 * its stdout and stderr go to /dev/null, with `outputs` to outputs[0] and outputs[1]. */
static pid_t spawn(char* const argv[], char* const envp[], int quiet, const int* outputs,
                   int* error) {
  /* Everything the child needs is prepared before fork (no allocation after it). */
  const char* path = "/bin:/usr/bin";
  for (char* const* e = envp; *e; ++e) {
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  }
  size_t dirs = 1;
  for (const char* c = path; *c; ++c) dirs += *c == ':';
  char** candidates = xmalloc((dirs + 1) * sizeof *candidates);
  size_t nc = 0;
  if (strchr(argv[0], '/')) {
    candidates[nc++] = argv[0];
  } else {
    const char* dir = path;
    for (;;) {
      const char* end = strchr(dir, ':');
      size_t len = end ? (size_t)(end - dir) : strlen(dir);
      candidates[nc++] = len ? fmt("%.*s/%s", (int)len, dir, argv[0]) : argv[0];
      if (!end) break;
      dir = end + 1;
    }
  }
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    *error = errno;
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int i = 0; i < 3; ++i) sigaction(FORWARDED[i], &dfl, NULL);
    sigaction(SIGPIPE, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (quiet) {
      int null = open("/dev/null", O_WRONLY);
      if (null >= 0) {
        dup2(null, 1);
        dup2(null, 2);
      }
    } else if (outputs) {
      dup2(outputs[0], 1);
      dup2(outputs[1], 2);
    }
    /* Like Python's close_fds: the program gets stdin, stdout and stderr only. */
    int w = pipefd[1];
    if (syscall(SYS_close_range, 3u, (unsigned)w - 1, 0u) != 0 ||
        syscall(SYS_close_range, (unsigned)w + 1, ~0u, 0u) != 0) {
      struct rlimit rl;
      long max =
          getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (long)rl.rlim_cur : 65536;
      for (long fd = 3; fd < max; ++fd) {
        if (fd != w) close((int)fd);
      }
    }
    int saved = 0, last = ENOENT;
    for (size_t i = 0; i < nc; ++i) {
      execve(candidates[i], argv, envp);
      last = errno;
      if (last != ENOENT && last != ENOTDIR && saved == 0) saved = last;
    }
    int e = saved ? saved : last;
    (void)!write(w, &e, sizeof e);
    _exit(127);
  }
  close(pipefd[1]);
  if (pid < 0) {
    *error = errno;
    close(pipefd[0]);
    return -1;
  }
  int e = 0;
  ssize_t r;
  do r = read(pipefd[0], &e, sizeof e);
  while (r < 0 && errno == EINTR);
  close(pipefd[0]);
  if (r == (ssize_t)sizeof e) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    *error = e;
    return -1;
  }
  return pid;
}

/* A wait status as a shell would report it: the code, or 128 + the signal. */
static int exit_code_of(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 1;
}

/* Waits for `pid`, reaping any orphan reparented to us meanwhile (we may be PID 1). */
static int wait_child(pid_t pid) {
  for (;;) {
    int status;
    pid_t got = waitpid(-1, &status, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (got == pid) return exit_code_of(status);
  }
}

static int tensorflow_importable(const char* python) {
  char* argv[] = {(char*)python, "-c", (char*)TF_IMPORTABLE_CODE, NULL};
  int error;
  pid_t pid = spawn(argv, environ, 1, NULL, &error);
  if (pid < 0) return 0;
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 0;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The program's environment: ours plus TF_CONFIG, TASK_INDEX and TASK_TYPE. */
static char** child_env(const Topology* t) {
  size_t n = 0;
  while (environ[n]) ++n;
  char** out = xmalloc((n + 4) * sizeof *out);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (strncmp(environ[i], "TF_CONFIG=", 10) == 0 || strncmp(environ[i], "TASK_INDEX=", 11) == 0 ||
        strncmp(environ[i], "TASK_TYPE=", 10) == 0) {
      continue;
    }
    out[k++] = environ[i];
  }
  out[k++] = fmt("TF_CONFIG=%s", tf_config_json(t));
  out[k++] = fmt("TASK_INDEX=%ld", t->index);
  out[k++] = fmt("TASK_TYPE=%s", t->role);
  out[k] = NULL;
  return out;
}

/* Copies the program's stdout and stderr (the read ends `from`) to ours and to the kept file,
 * reaping orphans meanwhile; returns the program's exit code once it has exited and its output
 * has closed (or DRAIN_SECONDS later, when a process it left behind holds it open). */
static int relay(pid_t pid, int from[2]) {
  int code = -1;
  double until = 0;
  char buf[16384];
  for (;;) {
    struct pollfd p[2];
    int which[2];
    nfds_t n = 0;
    for (int i = 0; i < 2; ++i) {
      if (from[i] < 0) continue;
      p[n].fd = from[i];
      p[n].events = POLLIN;
      which[n++] = i;
    }
    if (n == 0) return code >= 0 ? code : wait_child(pid);
    if (poll(p, n, 200) > 0) {
      for (nfds_t j = 0; j < n; ++j) {
        if (!p[j].revents) continue;
        ssize_t r = read(p[j].fd, buf, sizeof buf);
        if (r > 0) {
          write_all(which[j] + 1, buf, (size_t)r);
          keep(buf, (size_t)r);
        } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
          close(from[which[j]]);
          from[which[j]] = -1;
        }
      }
    }
    int status;
    pid_t got;
    while (code < 0 && (got = waitpid(-1, &status, WNOHANG)) > 0) {
      if (got == pid) {
        code = exit_code_of(status);
        until = now() + DRAIN_SECONDS;
      }
    }
    if (code >= 0 && now() > until) {
      for (int i = 0; i < 2; ++i) {
        if (from[i] >= 0) close(from[i]);
      }
      return code;
    }
  }
}

/* Runs the program as a child, forwards signals, returns its exit code. */
static int run_program(char** argv, const Topology* t) {
  char* before = read_termination_log();
  char** envp = child_env(t);
  /* With a kept copy of the output, the program writes into pipes the launcher relays. */
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (kept_fd >= 0 && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
    say("cannot relay the program's output (%s): it is not kept", error_text(errno));
    for (int i = 0; i < 2; ++i) {
      if (out[i] >= 0) close(out[i]);
      out[i] = -1;
    }
  }
  int relayed = out[0] >= 0;
  int outputs[2] = {out[1], err[1]};
  /* The forwarded signals wait until the child is known, then reach it. */
  sigset_t forwarded, old;
  forwarded_set(&forwarded);
  sigprocmask(SIG_BLOCK, &forwarded, &old);
  int error = 0;
  pid_t pid = spawn(argv, envp, 0, relayed ? outputs : NULL, &error);
  if (pid > 0) child_pid = pid;
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (relayed) {
    close(out[1]);
    close(err[1]);
  }
  int from[2] = {out[0], err[0]};
  if (pid < 0) {
    if (relayed) {
      close(from[0]);
      close(from[1]);
    }
    int code = error == EACCES || error == EPERM ? EXIT_NOT_EXECUTABLE : EXIT_NOT_FOUND;
    return fail(fmt("tfk8s: cannot start %s: %s", argv[0], error_text(error)), code);
  }
  int code = relayed ? relay(pid, from) : wait_child(pid);
  child_pid = 0;
  if (code != 0) {
    /* Not a "tfk8s: " verdict (which the library treats as final): the program failed, and its
     * Job may well run it again. */
    Str text = {0};
    str_addf(&text, "%s-%ld: program exited with code %d", t->role, t->index, code);
    if (code > 128 && code - 128 < 65) str_addf(&text, " (killed by %s)", signal_name(code - 128));
    char* after = read_termination_log();
    char* stripped = strip(after);
    if (*stripped && strcmp(after, before) != 0) {
      /* The program left its own termination message: keep it after ours. */
      str_addf(&text, "\n%s", after);
    }
    fail(text.s, code);
  }
  return code;
}

/* ---- --install ------------------------------------------------------------------------------ */

/* Where failure messages go: TFK8S_TERMINATION_LOG (empty: nowhere), else Kubernetes' file. */
static void choose_termination_log(void) {
  const char* log = getenv("TFK8S_TERMINATION_LOG");
  if (log) {
    termination_log = *log ? log : NULL;
  } else if (access(DEFAULT_TERMINATION_LOG, W_OK) == 0) {
    termination_log = DEFAULT_TERMINATION_LOG;
  }
}

/* Copies the rest of `in` to `out`: 0, or -1 with errno set. */
static int copy_fd(int in, int out, long long* copied) {
  char buf[1 << 16];
  for (;;) {
    ssize_t r = read(in, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r < 0 ? -1 : 0;
    for (ssize_t done = 0; done < r;) {
      ssize_t w = write(out, buf + done, (size_t)(r - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return -1;
      done += w;
    }
    *copied += r;
  }
}

static int install_failed(const char* dest, const char* step, int e) {
  return fail(fmt("tfk8s: launcher: cannot install to %s (%s: %s)", dest, step, error_text(e)), 1);
}

/* `--install DEST`: copies the running executable (/proc/self/exe) to DEST with mode 0555, so an
 * init container of an image that carries the launcher hands it to its pod's replica through an
 * emptyDir, with no shell or cp in that image. Written under a temporary name beside DEST and
 * renamed: DEST is either absent or complete. 0, or 1 with a "tfk8s: " verdict. */
static int install_self(const char* dest) {
  int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (in < 0) return install_failed(dest, "open /proc/self/exe", errno);
  char* tmp = fmt("%s.%ld.tmp", dest, (long)getpid());
  int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
  if (out < 0) {
    int e = errno;
    close(in);
    free(tmp);
    return install_failed(dest, "create", e);
  }
  long long copied = 0;
  const char* step = NULL;
  if (copy_fd(in, out, &copied) != 0) {
    step = "copy";
  } else if (fchmod(out, 0555) != 0) {
    step = "chmod";
  }
  int e = errno;
  if (close(out) != 0 && !step) {
    step = "close";
    e = errno;
  }
  if (!step && rename(tmp, dest) != 0) {
    step = "rename";
    e = errno;
  }
  close(in);
  if (step) unlink(tmp);
  free(tmp);
  if (step) return install_failed(dest, step, e);
  say("installed at %s (%lld bytes)", dest, copied);
  return 0;
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char** argv) {
  const char* python = "python3";
  char** program = NULL;
  int i = 1;
  while (i < argc) {
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) {
      if (i + 1 < argc) program = argv + i + 1;
      break;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      write_all(1, USAGE, sizeof USAGE - 1);
      return 0;
    }
    if (strcmp(a, "--install") == 0) {
      choose_termination_log();
      if (i != 1 || argc != 3) {
        return fail("tfk8s: launcher: --install takes one argument, DEST, and nothing else",
                    EXIT_CONFIG);
      }
      return install_self(argv[2]);
    }
    if (strcmp(a, "--python") == 0 && i + 1 < argc) {
      python = argv[i + 1];
      i += 2;
      continue;
    }
    if (strncmp(a, "--python=", 9) == 0) {
      python = a + 9;
      ++i;
      continue;
    }
    if (a[0] == '-') {
      Str b = {0};
      str_addf(&b, "tfk8s: launcher: unknown option %s (put the program after --)\n%s", a, USAGE);
      write_all(2, b.s, b.n);
      return EXIT_CONFIG;
    }
    program = argv + i;
    break;
  }
  choose_termination_log();
  install_signals();
  char host[256] = "";
  const char* hostname = getenv("HOSTNAME");
  if (!hostname || !*hostname) {
    gethostname(host, sizeof host - 1);
    hostname = host;
  }
  Topology t;
  double timeout, report_every, linger;
  if (resolve_topology(hostname, &t) || env_seconds("TFK8S_BARRIER_TIMEOUT", 600, &timeout) ||
      env_seconds("TFK8S_BARRIER_REPORT", 5, &report_every) ||
      env_seconds("TFK8S_BARRIER_LINGER", 60, &linger)) {
    return fail(fmt("tfk8s: %s", config_error), EXIT_CONFIG);
  }
  if (report_every == 0) report_every = 5;
  char* name = fmt("%s-%ld", t.role, t.index);
  /* A replica started again (its node lost, its program failed) joins a cluster that has
   * started already: peers that finished are gone for good, so waiting for every address
   * could only time out. The program reconnects to the others itself. */
  int again = start_incarnation(name) > 0;
  char* server[] = {(char*)python, "-c", (char*)TF_SERVER_CODE, NULL};
  if (!program) {
    char* strategy = strip(env("TFK8S_STRATEGY"));
    for (char* c = strategy; *c; ++c) {
      if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
    }
    if (strcmp(t.role, "ps") == 0 ||
        (strcmp(t.role, "worker") == 0 && strcmp(strategy, "parameter-server") == 0)) {
      if (!tensorflow_importable(python)) {
        return fail(fmt("tfk8s: no command given for %s and this image has no importable "
                        "tensorflow; give the role a command or use a TensorFlow image",
                        name),
                    EXIT_CONFIG);
      }
      program = server;
    } else {
      return fail(fmt("tfk8s: no command given for %s and the %s role has no default program; "
                      "give it a command",
                      name, t.role),
                  EXIT_CONFIG);
    }
    say("%s has no command: starting a TensorFlow server (job %s, task %ld)", name, t.role,
        t.index);
  }
  if (again && timeout > 0) {
    say("%s has started before: no start-up barrier", name);
  } else if (timeout > 0) {
    int code = run_barrier(&t, timeout, report_every, linger);
    if (code >= 0) return code;
  }
  if (first_signal) return 128 + first_signal;
  int code = run_program(program, &t);
  if (code == 0) forget_incarnations();
  return code;
}
