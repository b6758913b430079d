// The `tfk8s` command: the four workloads (TFCluster, DevInstance, ScheduledJob, Quota), the
// node inventory and the server's version from a shell, with kubectl's conventions. It is a
// client of the public library API only (like any user's program); the pure parts live in
// cli_core.cpp. See docs/cli.md.

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli_core.hpp"
#include "controller_cmd.hpp"
#include "output.hpp"
#include "tfk8s/client.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/fields.hpp"
#include "tfk8s/fleet.hpp"
#include "tfk8s/placement.hpp"
#include "tfk8s/quantity.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/workload.hpp"
#include "tfk8s/yaml.hpp"

#ifndef TFK8S_VERSION
#error "TFK8S_VERSION must be defined by the build"
#endif

namespace tfk8s::cli {
namespace {

using Rows = std::vector<std::vector<std::string>>;

// ---- global state ------------------------------------------------------------------------

struct Globals {
  std::string namespace_name;
  std::string context;
  std::string kubeconfig;
  std::string output;
  std::string selector;
  std::string owner;
  bool all_namespaces = false;
  bool no_preflight = false;  // --no-preflight: apply, scale, start and run skip the pre-flight
};

class Session {
 public:
  explicit Session(const Globals& g) : g_(g) {}
  Client& client() {
    if (!client_) {
      KubeconfigOptions o;
      o.path = g_.kubeconfig;
      o.context = g_.context;
      o.namespace_override = g_.namespace_name;
      client_.emplace(Client::FromDefault(o));
    }
    return *client_;
  }
  // -n, else the context's namespace.
  std::string Namespace() {
    return g_.namespace_name.empty() ? client().default_namespace() : g_.namespace_name;
  }
  // "" with -A (every namespace).
  std::string ListNamespace() { return g_.all_namespaces ? std::string() : Namespace(); }
  const Globals& globals() const { return g_; }

 private:
  const Globals& g_;
  std::optional<Client> client_;
};

bool StdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1; }
bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

std::string ReadInput(const std::string& file) {
  if (file == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ValidationError("file", file, "cannot be read (missing or not readable)");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Whether `output` is one of the formats that print objects (json, yaml, jsonpath=,
// jsonpath-as-json=, custom-columns=), not a table.
bool Structured(const std::string& output) {
  return output == "json" || output == "yaml" || output.rfind("jsonpath", 0) == 0 ||
         output.rfind("custom-columns=", 0) == 0;
}

// What -o jsonpath= / jsonpath-as-json= / custom-columns= print for `data` (one object, or a
// List); false for the other formats.
bool PrintTemplated(const Json& data, const std::string& output) {
  const std::string_view o = output;
  if (o.rfind("jsonpath=", 0) == 0 || o.rfind("jsonpath-as-json=", 0) == 0) {
    bool as_json = o.rfind("jsonpath-as-json=", 0) == 0;
    // kubectl's command line allows missing keys (an absent field prints nothing).
    std::cout << JsonPath::Parse(o.substr(o.find('=') + 1))
                     .Execute(data, /*allow_missing_keys=*/true, as_json);
    if (as_json) std::cout << "\n";
    return true;
  }
  if (o.rfind("custom-columns=", 0) == 0) {
    std::cout << CustomColumnsTable(o.substr(o.find('=') + 1), {data});
    return true;
  }
  return false;
}

// Objects in the requested format: YAML documents (default) or JSON (one object, or a List),
// or a template's output.
void PrintObjects(const std::vector<Json>& objects, const std::string& output) {
  if (PrintTemplated(objects.size() == 1
                         ? objects.front()
                         : Json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}},
                     output)) {
    return;
  }
  if (output == "json") {
    Json out = objects.size() == 1
                   ? objects.front()
                   : Json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", objects}};
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << ToYamlDocuments(objects);
  }
}

// A result that has a text table and a JSON form.
void PrintResult(const std::string& table, const Json& json, const std::string& output) {
  if (PrintTemplated(json, output)) return;
  if (output == "json") {
    std::cout << json.dump(2) << "\n";
  } else if (output == "yaml") {
    std::cout << ToYaml(json);
  } else {
    std::cout << table;
  }
}

// Whether a progress line is on the terminal (an error line must first clear it).
bool progress_shown = false;

void Progress(const std::string& line) {
  if (StderrIsTerminal()) {
    std::cerr << "\r\033[K" << line << std::flush;
    progress_shown = true;
  } else {
    std::cerr << line << "\n";
  }
}
void EndProgress() {
  if (progress_shown) std::cerr << "\r\033[K" << std::flush;
  progress_shown = false;
}

// ---- the four kinds ----------------------------------------------------------------------

struct KindFlags {
  std::string file;
  std::string name;
  std::vector<std::string> names;  // delete
  bool show_password = false;
  bool wait = false;
  std::string timeout = "5m";
  std::string until = "ready";
  WorkloadLogOptions logs;      // source: --role (a cluster), --run (a task)
  std::int64_t logs_tail = -1;  // --tail (-1: every line)
  std::string logs_since;       // --since
  std::string role;
  int replicas = -1;
  bool delete_namespace = false;
  std::string idle = "2h";
  bool dry_run = false;               // dev cull --dry-run (report only)
  std::string dry_run_mode = "none";  // --dry-run=none|client|server of apply, delete, scale
  bool policy_only = false;
  bool offline = false;
  bool watch = false;  // list/get --watch
};

// A failure already reported (fits on stdout, delete on stderr): exit 1 without an error line.
struct Reported {};

// A command line that parses but asks for something that cannot be (exit 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs a verb; errors become one line and exit code 1.
using Action = std::function<void()>;

// Adds verbs to one kind's command: `add` registers a verb and its action, `name_arg` the
// workload's name argument. Each kind adds its own verbs through it (Kind::AddOwnVerbs).
struct Verbs {
  CLI::App* cmd;
  Session* s;
  KindFlags* f;
  std::vector<std::pair<CLI::App*, Action>>* actions;
  std::string doc_kind;
  CLI::App* add(const std::string& verb, const std::string& help, Action action) const {
    CLI::App* v = cmd->add_subcommand(verb, help);
    actions->emplace_back(v, std::move(action));
    return v;
  }
  CLI::App* name_arg(CLI::App* v) const {
    v->add_option("name", f->name, "The " + doc_kind + "'s name")->required();
    return v;
  }
};

// What differs between the workloads; the verbs below are written once over it.
class Kind {
 public:
  Kind(std::string command, std::string doc_kind)
      : command_(std::move(command)), doc_kind_(std::move(doc_kind)) {}
  virtual ~Kind() = default;
  const std::string& command() const { return command_; }    // "tfcluster"
  const std::string& doc_kind() const { return doc_kind_; }  // "TFCluster"
  virtual bool namespaced() const { return true; }
  // Validates and renders (pure).
  virtual std::vector<Json> Render(const Json& doc) const = 0;
  // What `render` prints with a cluster: for the server's API versions, owned by an existing
  // root (Workload::RenderForApply).
  virtual std::vector<Json> RenderForApply(Session& /*s*/, const Json& doc) const {
    return Render(doc);
  }
  // What `render` prints without one.
  virtual std::vector<Json> RenderOffline(const Json& doc) const { return Render(doc); }
  // Refuses (ValidationError naming `where`) a checked document that `apply` must not send;
  // called for every document before any is sent.
  virtual void CheckApply(const Json& /*doc*/, const std::string& /*where*/) const {}
  // Sends the document's spec; returns what to print.
  virtual std::string Apply(Session& s, const Json& doc, bool show_password) const = 0;
  // The stored spec.
  virtual Json Get(Session& s, const std::string& ns, const std::string& name) const = 0;
  // The label naming the workload on every object it renders and on its pods ("": none, no
  // describe).
  virtual std::string NameLabel() const { return ""; }
  // The workload as a Kubernetes-style object (KubernetesObject): its stored spec and status;
  // null for a kind that has none (quotas: Get() as it is).
  virtual Json Object(Session& /*s*/, const std::string& /*ns*/,
                      const std::string& /*name*/) const {
    return nullptr;
  }
  // Rows (header first) of the workloads of `ns` ("" = all).
  virtual Rows List(Session& s, const std::string& ns, bool wide) const = 0;
  virtual void Status(Session& s, const std::string& ns, const std::string& name,
                      const std::string& output) const = 0;
  virtual void Delete(Session& s, const std::string& ns, const std::string& name,
                      std::optional<std::chrono::milliseconds> wait) const = 0;
  // The objects a delete removes (their apiVersion, kind and metadata name and namespace are
  // what counts): what `delete --dry-run=server` sends dry-run DELETEs for. The workloads: the
  // objects their stored spec renders.
  virtual std::vector<Json> DeletedObjects(Session& s, const std::string& ns,
                                           const std::string& name) const {
    Json doc = Get(s, ns, name);
    return RenderForApply(s, doc);
  }
  virtual FitResult Fits(Session& /*s*/, const Json& /*doc*/) const {
    throw ValidationError("kind", doc_kind(), "has no pre-flight");
  }
  virtual std::vector<std::string> WaitConditions() const { return {}; }
  virtual void Wait(Session& /*s*/, const std::string& /*ns*/, const std::string& /*name*/,
                    const std::string& /*until*/, std::chrono::milliseconds /*timeout*/,
                    const std::string& /*output*/) const {}
  virtual bool HasLogs() const { return false; }
  // Whether `list --watch` can follow it (the workloads: a Fleet's kinds are their doc kinds).
  virtual bool Watchable() const { return false; }
  virtual WorkloadLogStream Logs(Session& s, const std::string& ns, const std::string& name,
                                 const WorkloadLogOptions& request) const = 0;
  // The kind's own flags of `logs` (--role, --run) and of `apply` (--show-password).
  virtual void AddLogFlags(CLI::App* /*logs*/, KindFlags& /*f*/) const {}
  virtual void AddApplyFlags(CLI::App* /*apply*/, KindFlags& /*f*/) const {}
  // The kind's own verbs (scale, start, run…).
  virtual void AddOwnVerbs(const Verbs& /*v*/) const {}

 private:
  std::string command_;
  std::string doc_kind_;
};

// Every document of `file`, checked before anything is sent (defined with the verbs below).
std::vector<Json> LoadDocuments(const Kind& kind, const std::string& file,
                                const std::string& default_ns, const std::string& forced_ns,
                                bool for_apply = false);

// A workload as `-o json|yaml` prints it, the Kubernetes way: apiVersion tfk8s.io/v1 (a
// client-side version: no CRD is involved), kind, metadata (name, namespace, the spec's labels),
// spec (the stored spec but those) and status. `apply -f` reads it back (ReadSpecDocuments).
Json KubernetesObject(const std::string& kind, Json spec, Json status) {
  Json metadata{{"name", spec.value("name", std::string())}};
  if (spec.contains("namespace")) metadata["namespace"] = spec["namespace"];
  if (spec.contains("labels") && !spec["labels"].empty()) metadata["labels"] = spec["labels"];
  for (const char* key : {"name", "namespace", "labels"}) spec.erase(key);
  return {{"apiVersion", kObjectApiVersion},
          {"kind", kind},
          {"metadata", std::move(metadata)},
          {"spec", std::move(spec)},
          {"status", std::move(status)}};
}

std::vector<Json> RenderSpec(const TFClusterSpec& spec) { return RenderTFCluster(spec); }
std::vector<Json> RenderSpec(const DevInstanceSpec& spec) { return RenderDevInstance(spec); }
std::vector<Json> RenderSpec(const ScheduledJobSpec& spec) { return RenderScheduledJob(spec); }
std::vector<Json> RenderSpec(const QuotaSpec& spec) { return RenderQuota(spec); }

// The reading and rendering every kind does the same way through its spec type.
template <typename Spec>
class SpecKind : public Kind {
 public:
  using Kind::Kind;
  static Spec Read(const Json& doc) { return Spec::FromJson(doc); }
  std::vector<Json> Render(const Json& doc) const override { return RenderSpec(Read(doc)); }
};

std::string ProgressLine(const TFClusterStatus& p) {
  return ToString(p.phase) + ", " + std::to_string(p.NotReady()) + " not ready" +
         (p.message.empty() ? "" : ": " + p.message);
}
std::string ProgressLine(const DevInstanceStatus& p) {
  return ToString(p.phase) + (p.message.empty() ? "" : ": " + p.message);
}
std::string ResultText(const TFClusterStatus& st) { return ToString(st.phase) + "\n" + st.Table(); }
std::string ResultText(const DevInstanceStatus& st) { return st.Table(); }

// What the three workloads (not quotas) do the same way: an adapter over the library's
// workload spine (tfk8s::Workload<Kind>, whose instantiation `Workload` derives from).
template <typename Workload, typename DeleteOptions>
class WorkloadKind : public SpecKind<typename Workload::SpecType> {
  using Spec = typename Workload::SpecType;

 public:
  using SpecKind<Spec>::SpecKind;
  static Workload Load(Session& s, const std::string& ns, const std::string& name) {
    return Workload::Load(s.client(), ns, name);
  }
  bool HasLogs() const override { return true; }
  bool Watchable() const override { return true; }
  WorkloadLogStream Logs(Session& s, const std::string& ns, const std::string& name,
                         const WorkloadLogOptions& request) const override {
    return Load(s, ns, name).StreamLogs(request);
  }
  // The spine's wait, for the kinds that wait for their status (a task waits for a run).
  void Wait(Session& s, const std::string& ns, const std::string& name, const std::string& until,
            std::chrono::milliseconds timeout, const std::string& output) const override {
    if constexpr (Workload::KindType::kWaitsForStatus) {
      using Status = typename Workload::StatusType;
      Status st =
          Load(s, ns, name)
              .Wait({.until = until == "finished" ? WaitUntil::kFinished : WaitUntil::kReady,
                     .timeout = timeout,
                     .on_progress = [](const Status& p) { Progress(ProgressLine(p)); }});
      EndProgress();
      PrintResult(ResultText(st), FieldsToKubernetesJson(st), output);
    }
  }
  Json Get(Session& s, const std::string& ns, const std::string& name) const override {
    return Load(s, ns, name).spec().ToJson();
  }
  Json Object(Session& s, const std::string& ns, const std::string& name) const override {
    Workload w = Load(s, ns, name);
    return KubernetesObject(this->doc_kind(), w.spec().ToJson(),
                            FieldsToKubernetesJson(w.Status()));
  }
  void Delete(Session& s, const std::string& ns, const std::string& name,
              std::optional<std::chrono::milliseconds> wait) const override {
    DeleteOptions o;
    o.wait = wait;
    Load(s, ns, name).Delete(o);
  }
  FitResult Fits(Session& s, const Json& doc) const override {
    return Workload(s.client(), SpecKind<Spec>::Read(doc)).Preflight();
  }
  std::vector<Json> RenderForApply(Session& s, const Json& doc) const override {
    return Workload(s.client(), SpecKind<Spec>::Read(doc)).RenderForApply();
  }
};

std::string NameOf(const Json& doc) { return doc.value("name", std::string()); }

// Name rows with the namespace and the age (kubectl's AGE: -o wide's columns come after it);
// shared by the kinds listed as references.
Rows RefRows(const std::vector<WorkloadRef>& refs, const std::vector<std::string>& extra_header,
             const std::function<std::vector<std::string>(const WorkloadRef&)>& extra) {
  Rows rows;
  std::vector<std::string> header{"NAMESPACE", "NAME", "AGE"};
  header.insert(header.end(), extra_header.begin(), extra_header.end());
  rows.push_back(header);
  const auto now = std::chrono::system_clock::now();
  for (const auto& r : refs) {
    std::vector<std::string> row{r.namespace_name, r.name, Age(r.created, now)};
    if (extra) {
      std::vector<std::string> more;
      try {
        more = extra(r);
      } catch (const tfk8s::Error&) {
        // One workload that cannot be read (a stored spec refused, say; `status` tells why)
        // does not hide the others.
        more.assign(extra_header.size(), "Unknown");
      }
      row.insert(row.end(), more.begin(), more.end());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// ---- --dry-run=client|server (kubectl's) --------------------------------------------------

// What the option's values mean: "client" renders and sends nothing; "server" sends every
// write with dryRun=All (the server validates, defaults and admits it, and stores nothing).
constexpr const char* kDryRunModes[] = {"none", "client", "server"};

std::string DryRunSuffix(const std::string& mode) {
  return mode == "client" ? " (dry run)" : " (server dry run)";
}

void AddDryRunOption(CLI::App* verb, KindFlags& f) {
  verb->add_option("--dry-run", f.dry_run_mode,
                   "client: check and render, send nothing; server: send every write as a "
                   "server-side dry run (validated and admitted, nothing stored)")
      ->check(
          CLI::IsMember(std::vector<std::string>(std::begin(kDryRunModes), std::end(kDryRunModes))))
      ->capture_default_str();
}

// One object through a dry-run server-side apply: the object the server would store. A field
// the server does not let change (a Job's pod template) is one apply replaces the object for:
// then the object as rendered, with a note.
Json DryRunApply(Client& client, const Json& object) {
  ApplyOptions dry;
  dry.dry_run = true;
  dry.force = true;
  try {
    return client.Apply(object, dry);
  } catch (const Invalid& e) {
    if (std::string(e.what()).find("field is immutable") == std::string::npos) throw;
    std::cerr << "note: " << object.value("kind", "") << "/" << object["metadata"].value("name", "")
              << " changes a field that cannot be updated: apply replaces it\n";
    return object;
  }
}

// `apply --dry-run=client|server`: each document's line (`NOUN/NAME applied (dry run)`), or
// with -o json|yaml|jsonpath=…|custom-columns=… the objects (client: as rendered; server: as the
// server would store them). The server mode runs the pre-flight first, as apply does (not with
// --no-preflight).
void ApplyDryRun(Session& s, const Kind& k, const std::vector<Json>& docs,
                 const std::string& mode) {
  const std::string& output = s.globals().output;
  std::vector<Json> objects;
  for (const auto& doc : docs) {
    std::vector<Json> rendered;
    if (mode == "client") {
      rendered = k.Render(doc);
    } else {
      if (k.namespaced() && !s.globals().no_preflight) {
        FitResult fit = k.Fits(s, doc);
        if (!fit.fits) {
          std::cout.flush();
          std::cerr << "error: " << k.command() << "/" << NameOf(doc)
                    << " does not fit; nothing was sent: " << fit.Message() << "\n";
          throw Reported();
        }
      }
      for (const auto& object : k.RenderForApply(s, doc)) {
        rendered.push_back(DryRunApply(s.client(), object));
      }
    }
    if (!Structured(output)) {
      std::cout << k.command() << "/" << NameOf(doc) << " applied" << DryRunSuffix(mode) << "\n";
    }
    objects.insert(objects.end(), rendered.begin(), rendered.end());
  }
  if (Structured(output)) PrintObjects(objects, output);
}

// `delete --dry-run=client|server` of one workload: client reads it (NotFound when it is not
// there) and sends nothing; server also sends a dry-run DELETE for each object a delete removes
// (one already gone is skipped), so the server's admission and these credentials' rights
// answer.
void DeleteDryRun(Session& s, const Kind& k, const std::string& ns, const std::string& name,
                  const std::string& mode) {
  if (mode == "client") {
    (void)k.Get(s, ns, name);
    return;
  }
  Client& client = s.client();
  DeleteOptions dry;
  dry.dry_run = true;
  for (const auto& object : k.DeletedObjects(s, ns, name)) {
    const Json& metadata = object["metadata"];
    if (metadata.value("name", "").empty()) continue;  // a run the server names: none yet
    try {
      client.Delete(client.Resolve(object.value("apiVersion", ""), object.value("kind", "")),
                    metadata.value("namespace", ""), metadata.value("name", ""), dry);
    } catch (const NotFound&) {
    }
  }
}

class TFClusterCommand : public WorkloadKind<TFCluster, TFDeleteOptions> {
 public:
  TFClusterCommand() : WorkloadKind("tfcluster", "TFCluster") {}
  std::string NameLabel() const override { return "tfk8s.io/cluster"; }
  void AddLogFlags(CLI::App* logs, KindFlags& f) const override {
    logs->add_option("--role", f.logs.source,
                     "Only this role (ps, worker, chief, evaluator) or replica (worker-1)");
  }
  std::string Apply(Session& s, const Json& doc, bool) const override {
    TFCluster cluster(s.client(), Read(doc));
    TFApplyOptions options;
    options.preflight = !s.globals().no_preflight;
    auto objects = cluster.Apply(options);
    return "tfcluster/" + NameOf(doc) + " applied (" + std::to_string(objects.size()) +
           " objects)\n";
  }
  Rows List(Session& s, const std::string& ns, bool wide) const override {
    Client& c = s.client();
    return RefRows(
        TFCluster::ListRefs(c, ns, s.globals().owner, s.globals().selector),
        wide ? std::vector<std::string>{"PHASE", "NOT-READY"} : std::vector<std::string>{},
        wide ? std::function<std::vector<std::string>(const WorkloadRef&)>([&c](const WorkloadRef&
                                                                                    r) {
          TFClusterStatus st = TFCluster::Load(c, r.namespace_name, r.name).Status();
          return std::vector<std::string>{ToString(st.phase), std::to_string(st.NotReady())};
        })
             : nullptr);
  }
  void Status(Session& s, const std::string& ns, const std::string& name,
              const std::string& output) const override {
    TFClusterStatus st = TFCluster::StatusOf(s.client(), ns, name);
    PrintResult(
        ToString(st.phase) + (st.message.empty() ? "" : ": " + st.message) + "\n" + st.Table(),
        FieldsToKubernetesJson(st), output);
  }
  std::vector<std::string> WaitConditions() const override { return {"ready", "finished"}; }
  void AddOwnVerbs(const Verbs& v) const override {
    Session* s = v.s;
    KindFlags* f = v.f;
    CLI::App* sc = v.add("scale", "Change one role's replica count and apply", [s, f] {
      TFCluster cluster = TFCluster::Load(s->client(), s->Namespace(), f->name);
      const std::string& mode = f->dry_run_mode;
      if (mode == "client") {
        // The new spec checked (role, count) and rendered; nothing sent.
        TFClusterSpec next = cluster.spec();
        TFRoleSpec* role = f->role == "ps"          ? &next.ps
                           : f->role == "worker"    ? &next.worker
                           : f->role == "chief"     ? &next.chief
                           : f->role == "evaluator" ? &next.evaluator
                                                    : nullptr;
        if (role == nullptr) {
          throw ValidationError("role", f->role, "must be one of chief, ps, worker, evaluator");
        }
        role->replicas = f->replicas;
        (void)RenderTFCluster(next);
      } else {
        TFApplyOptions options;
        options.preflight = !s->globals().no_preflight;
        options.dry_run = mode == "server";
        cluster.Scale(f->role, f->replicas, options);
      }
      std::cout << "tfcluster/" << f->name << " scaled (" << f->role << "=" << f->replicas << ")"
                << (mode == "none" ? "" : DryRunSuffix(mode)) << "\n";
    });
    AddDryRunOption(sc, *f);
    v.name_arg(sc);
    sc->add_option("--role", f->role, "ps, worker, chief or evaluator")->required();
    sc->add_option("--replicas", f->replicas, "New replica count")
        ->required()
        ->check(CLI::NonNegativeNumber);
  }
};

std::string AccessText(const DevStartResult& started, bool show_password) {
  std::string out = started.access.Table();
  out += show_password ? "password: " + started.password + "\n"
                       : "password: (not shown; --show-password shows it)\n";
  return out;
}

class DevCommand : public WorkloadKind<DevInstance, DevDeleteOptions> {
 public:
  DevCommand() : WorkloadKind("dev", "DevInstance") {}
  std::string NameLabel() const override { return "tfk8s.io/instance"; }
  void AddApplyFlags(CLI::App* apply, KindFlags& f) const override {
    apply->add_flag("--show-password", f.show_password, "Print a created instance's password");
  }
  std::string Apply(Session& s, const Json& doc, bool show_password) const override {
    DevInstanceSpec spec = Read(doc);
    try {
      DevInstance existing = Load(s, spec.namespace_name, spec.name);
      existing.set_spec(spec);
      existing.Apply();
      return "dev/" + spec.name + " configured\n";
    } catch (const NotFound&) {
      DevInstance created(s.client(), spec);
      DevCreateOptions options;
      options.preflight = !s.globals().no_preflight;
      return "dev/" + spec.name + " created\n" + AccessText(created.Create(options), show_password);
    }
  }
  Rows List(Session& s, const std::string& ns, bool wide) const override {
    Rows rows{{"NAMESPACE", "NAME", "OWNER", "IMAGE", "RUNNING", "READY", "AGE"}};
    if (wide) rows.front().insert(rows.front().end(), {"PHASE", "NODE", "RESTARTS", "REASON"});
    const auto now = std::chrono::system_clock::now();
    for (const auto& d :
         DevInstance::List(s.client(), ns, s.globals().owner, s.globals().selector)) {
      std::vector<std::string> row{d.namespace_name,
                                   d.name,
                                   d.owner,
                                   d.image,
                                   d.running ? "yes" : "no",
                                   d.ready ? "yes" : "no",
                                   Age(d.created, now)};
      if (wide) {
        DevInstanceStatus st = Load(s, d.namespace_name, d.name).Status();
        row.insert(row.end(), {ToString(st.phase), st.node.empty() ? "-" : st.node,
                               std::to_string(st.restarts), st.reason.empty() ? "-" : st.reason});
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }
  void Status(Session& s, const std::string& ns, const std::string& name,
              const std::string& output) const override {
    DevInstanceStatus st = Load(s, ns, name).Status();
    PrintResult(st.Table(), FieldsToKubernetesJson(st), output);
  }
  std::vector<std::string> WaitConditions() const override { return {"ready"}; }
  void AddOwnVerbs(const Verbs& v) const override {
    Session* s = v.s;
    KindFlags* f = v.f;
    CLI::App* start = v.add("start", "Start a stopped instance (a fresh password)", [s, f] {
      DevStartOptions options;
      options.preflight = !s->globals().no_preflight;
      DevStartResult r = DevInstance::Load(s->client(), s->Namespace(), f->name).Start(options);
      std::cout << "dev/" << f->name << " started\n" << AccessText(r, f->show_password);
    });
    v.name_arg(start);
    start->add_flag("--show-password", f->show_password, "Print the new password");
    v.name_arg(v.add("stop", "Stop it (volumes kept)", [s, f] {
      DevInstance::Load(s->client(), s->Namespace(), f->name).Stop();
      std::cout << "dev/" << f->name << " stopped\n";
    }));
    v.name_arg(v.add("access", "Where to reach its tools (never the password)", [s, f] {
      DevAccess access = DevInstance::Load(s->client(), s->Namespace(), f->name).Access();
      PrintResult(access.Table(), access.ToJson(), s->globals().output);
    }));
    CLI::App* cull = v.add(
        "cull",
        "Stop running instances idle at least their own policy's idle.after, else --idle "
        "(-A: every namespace; --owner)",
        [s, f] {
          DevCullOptions o;
          o.namespace_name = s->ListNamespace();
          o.owner = s->globals().owner;
          o.idle_after =
              std::chrono::duration_cast<std::chrono::seconds>(ParseDuration(f->idle, "--idle"));
          o.action = f->dry_run ? DevIdleAction::kReport : DevIdleAction::kStop;
          o.policy_only = f->policy_only;
          auto decisions = CullIdleDevInstances(s->client(), o);
          Json json = Json::array();
          for (const auto& d : decisions) json.push_back(d.ToJson());
          PrintResult(FormatCullTable(decisions), json, s->globals().output);
        });
    cull->add_option("--idle", f->idle,
                     "The default for instances without their own idle policy: idle at least "
                     "this long, stopped (e.g. 90m, 2h)");
    cull->add_flag("--dry-run", f->dry_run, "Only report what would be stopped");
    cull->add_flag("--policy-only", f->policy_only,
                   "No default: only instances with their own idle policy (spec idle.after) are "
                   "probed and culled; the others are reported skipped");
  }
};

std::string TimeText(const std::optional<std::chrono::system_clock::time_point>& t) {
  return t ? FormatRfc3339(*t) : "-";
}

class JobCommand : public WorkloadKind<ScheduledJob, ScheduledJobDeleteOptions> {
 public:
  JobCommand() : WorkloadKind("job", "ScheduledJob") {}
  std::string NameLabel() const override { return "tfk8s.io/scheduledjob"; }
  void AddLogFlags(CLI::App* logs, KindFlags& f) const override {
    logs->add_option("--run", f.logs.source, "This run (default: the newest)");
  }
  // `apply` converges a schedule, and applying it again changes nothing; an on-demand task
  // has nothing to converge (each run is a new Job), so it is refused, not run.
  void CheckApply(const Json& doc, const std::string& where) const override {
    if (Read(doc).scheduled()) return;
    throw ValidationError(where + ": schedule", "",
                          "`job apply` applies a schedule and this task has none (an on-demand "
                          "task is not applied: each run is a new one); start a run with "
                          "`tfk8s job run -f FILE`");
  }
  // An on-demand run named from its content, as RenderForApply names it.
  std::vector<Json> RenderOffline(const Json& doc) const override {
    ScheduledJobRenderOptions o;
    o.fixed_run_name = true;
    return RenderScheduledJob(Read(doc), o);
  }
  std::string Apply(Session& s, const Json& doc, bool) const override {
    ScheduledJob job(s.client(), Read(doc));
    ApplyScheduleOptions options;
    options.preflight = !s.globals().no_preflight;
    job.Apply(options);  // ValidationError without a schedule (CheckApply refused it already)
    return "job/" + job.spec().name + " applied (schedule \"" + job.spec().schedule + "\")\n";
  }
  Rows List(Session& s, const std::string& ns, bool wide) const override {
    Client& c = s.client();
    return RefRows(ScheduledJob::ListRefs(c, ns, s.globals().owner, s.globals().selector),
                   wide ? std::vector<std::string>{"SCHEDULE", "SUSPENDED", "ACTIVE"}
                        : std::vector<std::string>{},
                   wide ? std::function<std::vector<std::string>(const WorkloadRef&)>(
                              [&c](const WorkloadRef& r) {
                                ScheduleStatus st =
                                    ScheduledJob::Load(c, r.namespace_name, r.name).Status();
                                return std::vector<std::string>{st.exists ? st.schedule : "-",
                                                                st.suspended ? "yes" : "no",
                                                                std::to_string(st.active.size())};
                              })
                        : nullptr);
  }
  void Status(Session& s, const std::string& ns, const std::string& name,
              const std::string& output) const override {
    ScheduledJob job = Load(s, ns, name);
    ScheduleStatus st = job.Status();
    std::vector<JobRun> runs = job.History();
    Rows rows{{"SCHEDULE", "SUSPENDED", "LAST-SCHEDULE", "NEXT-SCHEDULE", "ACTIVE"}};
    rows.push_back({st.exists ? st.schedule : "(on demand)", st.suspended ? "yes" : "no",
                    TimeText(st.last_schedule_time), TimeText(st.next_schedule_time),
                    std::to_string(st.active.size())});
    Json json = FieldsToKubernetesJson(st);
    json["runs"] = Json::array();
    for (const auto& r : runs) json["runs"].push_back(FieldsToKubernetesJson(r));
    PrintResult(FormatTextTable(rows) + "\n" + FormatRunTable(runs), json, output);
  }
  std::vector<std::string> WaitConditions() const override { return {"finished"}; }
  void Wait(Session& s, const std::string& ns, const std::string& name, const std::string&,
            std::chrono::milliseconds timeout, const std::string& output) const override {
    ScheduledJob job = Load(s, ns, name);
    std::string run = job.NewestRun();
    WaitOptions<JobRun> o;
    o.until = WaitUntil::kFinished;
    o.timeout = timeout;
    o.on_progress = [](const JobRun& r) { Progress(r.name + ": " + ToString(r.result)); };
    JobRun done = job.WaitForRun(run, o);
    EndProgress();
    PrintResult(FormatRunTable({done}), done.ToJson(), output);
  }
  void AddOwnVerbs(const Verbs& v) const override {
    Session* s = v.s;
    KindFlags* f = v.f;
    CLI::App* run_verb = v.add(
        "run", "Start a run now: of the stored task NAME, or of each task of a spec file (-f)",
        [this, s, f] {
          RunOptions options;
          options.preflight = !s->globals().no_preflight;
          if (f->file.empty()) {
            JobRun run = ScheduledJob::Load(s->client(), s->Namespace(), f->name).RunNow(options);
            std::cout << "job/" << f->name << " run " << run.name << " started\n";
            return;
          }
          for (const auto& doc :
               LoadDocuments(*this, f->file, s->Namespace(), s->globals().namespace_name)) {
            ScheduledJob job(s->client(), Read(doc));
            JobRun run = job.RunNow(options);
            std::cout << "job/" << job.spec().name << " run " << run.name << " started\n"
                      << std::flush;
          }
        });
    CLI::Option* name =
        run_verb->add_option("name", f->name, "The stored ScheduledJob's name (or -f)");
    run_verb
        ->add_option("-f,--filename", f->file,
                     "Spec file, a directory of them, - for stdin: a run of each task (a task with "
                     "a schedule runs "
                     "from its applied CronJob)")
        ->excludes(name);
    run_verb->require_option(1);
    v.name_arg(v.add("history", "Its runs", [s, f] {
      auto runs = ScheduledJob::Load(s->client(), s->Namespace(), f->name).History();
      Json json = Json::array();
      for (const auto& r : runs) json.push_back(FieldsToKubernetesJson(r));
      PrintResult(FormatRunTable(runs), json, s->globals().output);
    }));
    v.name_arg(v.add("suspend", "No new scheduled runs", [s, f] {
      ScheduledJob::Load(s->client(), s->Namespace(), f->name).Suspend();
      std::cout << "job/" << f->name << " suspended\n";
    }));
    v.name_arg(v.add("resume", "Scheduled runs again", [s, f] {
      ScheduledJob::Load(s->client(), s->Namespace(), f->name).Resume();
      std::cout << "job/" << f->name << " resumed\n";
    }));
  }
};

class QuotaCommand : public SpecKind<QuotaSpec> {
 public:
  QuotaCommand() : SpecKind("quota", "Quota") {}
  bool namespaced() const override { return false; }
  std::string Apply(Session& s, const Json& doc, bool) const override {
    QuotaUsage usage = ApplyQuota(s.client(), Read(doc));
    return "quota/" + NameOf(doc) + " applied\n" + FormatUsageTable({usage});
  }
  // The spec as the server holds it (what `apply -f` takes back).
  Json Get(Session& s, const std::string&, const std::string& name) const override {
    return GetQuotaSpec(s.client(), name).ToJson();
  }
  // kind Quota: the spec, and the usage of the queue's quotas as its status.
  Json Object(Session& s, const std::string&, const std::string& name) const override {
    return KubernetesObject(doc_kind(), Get(s, "", name),
                            {{"usage", UsagesJson(GetQuotaUsage(s.client(), name))}});
  }
  // -o wide: used/hard of the resources a queue is usually about ("-": not limited).
  static constexpr const char* kWideResources[][2] = {{"CPU", "requests.cpu"},
                                                      {"MEMORY", "requests.memory"},
                                                      {"GPU", "requests.nvidia.com/gpu"},
                                                      {"PODS", "pods"}};
  Rows List(Session& s, const std::string&, bool wide) const override {
    Rows rows{{"QUEUE", "RESOURCES", "READY"}};
    if (wide) {
      for (const auto& [column, resource] : kWideResources) rows.front().push_back(column);
    }
    for (const auto& u : ListQueues(s.client())) {
      std::vector<std::string> row{u.ns, std::to_string(u.resources.size()),
                                   u.ready ? "yes" : "no"};
      if (wide) {
        for (const auto& [column, resource] : kWideResources) {
          std::optional<ResourceUsage> r = u.Find(resource);
          // In Kubernetes' notation, as kubectl prints quantities (2700m, 16Gi).
          row.push_back(r ? r->used.ToString() + "/" + r->hard.ToString() : "-");
        }
      }
      rows.push_back(std::move(row));
    }
    return rows;
  }
  void Status(Session& s, const std::string&, const std::string& name,
              const std::string& output) const override {
    auto usages = GetQuotaUsage(s.client(), name);
    if (usages.empty())
      throw NotFound(ErrorKind::kNotFound, "quota/" + name + " not found", 404, "NotFound");
    PrintResult(FormatUsageTable(usages), UsagesJson(usages), output);
  }
  // The library's delete is idempotent (nothing there is not an error); the command says
  // NotFound instead of "deleted" when there was nothing to delete, as `get` and `status` do.
  void Delete(Session& s, const std::string&, const std::string& name,
              std::optional<std::chrono::milliseconds>) const override {
    if (!DeleteQuota(s.client(), name, delete_namespace)) {
      throw NotFound(ErrorKind::kNotFound,
                     "quota/" + name + " not found" +
                         (delete_namespace ? " (no namespace " + name + ")"
                                           : " (no ResourceQuota or LimitRange " + name +
                                                 " in namespace " + name + ")"),
                     404, "NotFound");
    }
  }
  WorkloadLogStream Logs(Session&, const std::string&, const std::string&,
                         const WorkloadLogOptions&) const override {
    throw ValidationError("kind", "Quota", "has no logs");
  }
  // The ResourceQuota and LimitRange of the queue's own namespace, or the namespace itself.
  std::vector<Json> DeletedObjects(Session& s, const std::string&,
                                   const std::string& name) const override {
    std::vector<Json> out;
    for (auto& object : RenderQuota(GetQuotaSpec(s.client(), name))) {
      const std::string kind = object.value("kind", "");
      const std::string ns =
          object["metadata"].value("namespace", object["metadata"].value("name", ""));
      if (ns != name) continue;  // a member's namespace: not deleted with the queue
      if (delete_namespace ? kind == "Namespace"
                           : (kind == "ResourceQuota" || kind == "LimitRange"))
        out.push_back(std::move(object));
    }
    return out;
  }
  static Json UsagesJson(const std::vector<QuotaUsage>& usages) {
    Json out = Json::array();
    for (const auto& u : usages) out.push_back(u.ToJson());
    return out;
  }
  mutable bool delete_namespace = false;
  void AddOwnVerbs(const Verbs& v) const override {
    Session* s = v.s;
    v.add("usage", "Used, hard and remaining of the namespace's quotas (-A: every queue)", [s] {
      auto usages = s->globals().all_namespaces ? ListQueues(s->client())
                                                : GetQuotaUsage(s->client(), s->Namespace());
      PrintResult(FormatUsageTable(usages), QuotaCommand::UsagesJson(usages), s->globals().output);
    });
  }
};

// ---- verbs over a kind -------------------------------------------------------------------

// Checks one document (namespace, known fields, valid, renders) before anything is sent; fills
// in the namespace. `where` names it in messages.
void CheckDocument(const Kind& kind, Json& doc, const std::string& where,
                   const std::string& default_ns, const std::string& forced_ns) {
  if (kind.namespaced()) {
    if (doc.contains("namespace") && doc["namespace"].is_string()) {
      std::string ns = doc["namespace"];
      if (!forced_ns.empty() && ns != forced_ns) {
        throw ValidationError(where + ": namespace", ns, "differs from --namespace " + forced_ns);
      }
    } else if (!doc.contains("namespace") || doc["namespace"].is_null()) {
      doc["namespace"] = default_ns;
    }
  }
  try {
    (void)kind.Render(doc);  // FromJson refuses unknown fields, then validates and renders
  } catch (const ValidationError& e) {
    throw ValidationError(where + ": " + e.field(), e.value(), e.server_message());
  }
}

std::string Origin(const std::string& file) { return file == "-" ? "stdin" : file; }

// What `-f` names, each input with its name for messages: stdin ("-"), a file, or the .yaml,
// .yml and .json files of a directory (not its subdirectories), sorted by name, as `kubectl
// apply -f DIR` reads them.
std::vector<std::pair<std::string, std::string>> ReadInputs(const std::string& file) {
  if (file == "-" || !std::filesystem::is_directory(file)) {
    return {{Origin(file), ReadInput(file)}};
  }
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(file)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
      paths.push_back(entry.path().string());
    }
  }
  if (paths.empty()) {
    throw ValidationError("file", file, "is a directory without .yaml, .yml or .json files");
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const auto& path : paths) inputs.emplace_back(path, ReadInput(path));
  return inputs;
}

// Every document of `file` (a directory: of each of its spec files), checked before anything
// is sent; `for_apply`: also what `apply` must not send (Kind::CheckApply).
std::vector<Json> LoadDocuments(const Kind& kind, const std::string& file,
                                const std::string& default_ns, const std::string& forced_ns,
                                bool for_apply) {
  std::vector<Json> all;
  for (const auto& [origin, text] : ReadInputs(file)) {
    std::vector<Json> docs = ReadSpecDocuments(text, origin, kind.doc_kind());
    for (std::size_t i = 0; i < docs.size(); ++i) {
      const std::string where = origin + " document " + std::to_string(i + 1);
      CheckDocument(kind, docs[i], where, default_ns, forced_ns);
      if (for_apply) kind.CheckApply(docs[i], where);
    }
    all.insert(all.end(), std::make_move_iterator(docs.begin()),
               std::make_move_iterator(docs.end()));
  }
  return all;
}

// One document's pre-flight: "NOUN/NAME: fits" or "does not fit" and why, then the notes (or
// the fields with -o json|yaml). Returns whether it fits.
bool ReportFit(const Kind& kind, const Json& doc, const FitResult& fit, const std::string& output,
               Json* records) {
  if (output == "json" || output == "yaml") {
    Json record{{"kind", kind.doc_kind()},
                {"name", NameOf(doc)},
                {"namespace", doc.value("namespace", "")}};
    record.update(fit.ToJson());
    records->push_back(std::move(record));
    return fit.fits;
  }
  std::cout << kind.command() << "/" << NameOf(doc) << ": " << (fit.fits ? "fits" : "does not fit")
            << "\n";
  if (!fit.fits) {
    std::string why = fit.Message();
    std::cout << why << (why.empty() || why.back() == '\n' ? "" : "\n");
  }
  for (const auto& note : fit.notes) std::cout << "note: " << note << "\n";
  return fit.fits;
}

std::vector<std::string> NamesOf(const Kind& kind, const Rows& rows) {
  std::vector<std::string> names;
  for (std::size_t i = 1; i < rows.size(); ++i) names.push_back(rows[i][kind.namespaced() ? 1 : 0]);
  return names;
}

// The list (of --owner's workloads only, when given, and of -l's: the kinds select on the
// server, by the roots' labels, which hold the specs').
Rows Listing(Session& s, const Kind& kind, bool wide) {
  if (!kind.namespaced() && !s.globals().owner.empty()) {
    throw ValidationError("owner", s.globals().owner, "quotas belong to a namespace, not a user");
  }
  if (!kind.namespaced() && !s.globals().selector.empty()) {
    throw ValidationError("selector", s.globals().selector,
                          "quota listings are not filtered by labels");
  }
  return kind.List(s, kind.namespaced() ? s.ListNamespace() : "", wide);
}

void PrintListing(Session& s, const Kind& kind, const Rows& rows) {
  const std::string& output = s.globals().output;
  // A row's workload as an object (namespace and name are the first columns; a quota's row
  // starts with its name).
  auto object = [&](const std::vector<std::string>& row) {
    return kind.namespaced() ? kind.Object(s, row[0], row[1]) : kind.Object(s, "", row[0]);
  };
  // The first one (only for the formats that print objects): null for a kind that has none.
  Json first = Structured(output) && rows.size() > 1 ? object(rows[1]) : Json(nullptr);
  if (output == "name") {
    for (const auto& name : NamesOf(kind, rows)) std::cout << kind.command() << "/" << name << "\n";
  } else if (Structured(output) && (rows.size() == 1 || !first.is_null())) {
    // The workloads themselves, as a List (each one read: its spec and status).
    Json items = Json::array();
    for (std::size_t i = 1; i < rows.size(); ++i) {
      items.push_back(i == 1 ? first : object(rows[i]));
    }
    PrintResult("", Json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}}, output);
  } else if (Structured(output)) {
    Json items = Json::array();
    for (std::size_t i = 1; i < rows.size(); ++i) {
      Json item = Json::object();
      for (std::size_t c = 0; c < rows[0].size(); ++c) item[rows[0][c]] = rows[i][c];
      items.push_back(item);
    }
    PrintResult("", items, output);
  } else {
    std::cout << FormatTextTable(rows);
  }
}

constexpr int kColours[] = {31, 32, 33, 34, 35, 36};

std::string ColourPrefix(const std::string& source) {
  std::size_t h = std::hash<std::string>{}(source);
  return "\033[" + std::to_string(kColours[h % std::size(kColours)]) + "m[" + source + "]\033[0m ";
}

void StreamLines(WorkloadLogStream stream) {
  bool colour = StdoutIsTerminal();
  while (true) {
    std::optional<WorkloadLogLine> line = stream.Next(std::chrono::seconds(1));
    if (!line) {
      if (stream.ended()) break;
      continue;
    }
    if (colour) {
      std::cout << ColourPrefix(line->source) << line->line << "\n";
    } else {
      std::cout << line->Prefixed() << "\n";
    }
    std::cout.flush();
  }
}

// ---- the command tree --------------------------------------------------------------------

CommandNode TreeOf(const CLI::App& app, const std::vector<std::string>& inherited) {
  CommandNode node;
  node.name = app.get_name();
  node.flags = inherited;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr()) continue;  // inherited
    for (const auto& s : opt->get_snames()) node.flags.push_back("-" + s);
    for (const auto& l : opt->get_lnames()) node.flags.push_back("--" + l);
    // A workload's (or a queue's) name argument: completed from the noun's list.
    const std::string positional = opt->get_positional() ? opt->get_name() : "";
    if ((positional == "name" || positional == "names") && app.get_parent() != nullptr &&
        app.get_parent()->get_parent() != nullptr) {
      node.names_of = app.get_parent()->get_name();
    }
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    node.children.push_back(TreeOf(*sub, inherited));
  }
  return node;
}

// `render`: each document's objects, for the server when one answers (API versions, owner
// references to an existing root), else offline with a note on stderr saying what was assumed.
void RenderDocuments(Session& s, const Kind& k, const std::string& file, bool offline) {
  const std::string& forced = s.globals().namespace_name;
  std::string default_ns = forced;
  std::string why_offline = offline ? "--offline" : "";
  if (default_ns.empty()) {
    try {
      default_ns = s.Namespace();  // the context's: no request
    } catch (const ConfigError& e) {
      default_ns = "default";
      if (why_offline.empty()) why_offline = "no kubeconfig: " + std::string(e.what());
    }
  }
  auto docs = LoadDocuments(k, file, default_ns, forced);
  std::vector<Json> objects;
  for (const auto& doc : docs) {
    std::vector<Json> rendered;
    if (why_offline.empty()) {
      try {
        rendered = k.RenderForApply(s, doc);
      } catch (const TransportError& e) {
        why_offline = std::string("the server did not answer: ") + e.what();
      } catch (const ConfigError& e) {
        why_offline = std::string("no kubeconfig: ") + e.what();
      } catch (const Unauthorized& e) {
        why_offline = std::string("the server refused the credentials: ") + e.what();
      } catch (const Forbidden& e) {
        why_offline = std::string("these credentials may not read it: ") + e.what();
      }
    }
    if (!why_offline.empty() && rendered.empty()) rendered = k.RenderOffline(doc);
    objects.insert(objects.end(), rendered.begin(), rendered.end());
  }
  if (!why_offline.empty() && why_offline != "--offline") {
    std::string reason = why_offline;
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    std::cerr << "note: rendered offline (" << reason << "): namespace " << default_ns
              << ", API versions of Kubernetes >= 1.21 (CronJob batch/v1), no ownerReferences\n";
  }
  PrintObjects(objects, s.globals().output);
}

[[noreturn]] void ExitNow(int code);  // below

// An object as `diff` compares it: without what the server alone writes (managedFields,
// resourceVersion, generation, status).
Json ForDiff(Json object) {
  if (object.contains("metadata") && object["metadata"].is_object()) {
    for (const char* k : {"managedFields", "resourceVersion", "generation"}) {
      object["metadata"].erase(k);
    }
  }
  object.erase("status");
  return object;
}

// `live` cut down to the fields `desired` has (recursively; arrays of the same length element by
// element), so that comparing it with `desired` shows only what `desired` changes.
Json ProjectOnto(const Json& live, const Json& desired) {
  if (live.is_object() && desired.is_object()) {
    Json out = Json::object();
    for (const auto& [key, value] : desired.items()) {
      if (live.contains(key)) out[key] = ProjectOnto(live[key], value);
    }
    return out;
  }
  if (live.is_array() && desired.is_array() && live.size() == desired.size()) {
    Json out = Json::array();
    for (std::size_t i = 0; i < live.size(); ++i) out.push_back(ProjectOnto(live[i], desired[i]));
    return out;
  }
  return live;
}

// `diff -f FILE`: what `apply` would change, as `kubectl diff` shows it. Each object of
// RenderForApply() goes through a server-side dry-run apply (the server merges, defaults and
// admits it; nothing is stored); the live objects and the merged ones are written to two
// directories and compared with `diff -u -N`. Exit 0: no differences; 1: differences; 2: an
// error (kubectl diff's codes).
int DiffDocuments(Session& s, const Kind& k, const std::string& file) {
  auto docs = LoadDocuments(k, file, s.Namespace(), s.globals().namespace_name);
  namespace fs = std::filesystem;
  char pattern[] = "/tmp/tfk8s-diff-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw std::runtime_error("cannot create a temporary directory");
  const fs::path dir = pattern;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{dir};
  fs::create_directory(dir / "LIVE");
  fs::create_directory(dir / "MERGED");
  Client& client = s.client();
  for (const auto& doc : docs) {
    for (const auto& object : k.RenderForApply(s, doc)) {
      const std::string api_version = object.value("apiVersion", "");
      const std::string kind = object.value("kind", "");
      const std::string ns = object["metadata"].value("namespace", "");
      const std::string name = object["metadata"].value("name", "");
      ResourceType type = client.Resolve(api_version, kind);
      std::string file_name = api_version + "." + kind + "." + ns + "." + name;
      std::replace(file_name.begin(), file_name.end(), '/', '.');
      ApplyOptions dry;
      dry.dry_run = true;
      dry.force = true;
      std::optional<Json> live;
      try {
        live = ForDiff(client.Get(type, ns, name));
      } catch (const NotFound&) {
        // New: diff -N shows it whole.
      }
      Json merged;
      try {
        merged = ForDiff(client.Apply(object, dry));
      } catch (const Invalid& e) {
        // A field the server does not let change (a Job's pod template): apply replaces the
        // object. Compared on the fields tfk8s renders, so the server's defaults are no noise.
        if (!live || std::string(e.what()).find("field is immutable") == std::string::npos) throw;
        std::cerr << "note: " << kind << "/" << name
                  << " changes a field that cannot be updated: apply replaces it\n";
        live = ProjectOnto(*live, object);
        merged = object;
      }
      std::ofstream(dir / "MERGED" / file_name) << ToYaml(merged);
      if (live) std::ofstream(dir / "LIVE" / file_name) << ToYaml(*live);
    }
  }
  std::cout.flush();
  const std::string command =
      "cd '" + dir.string() + "' && diff -u -N -r LIVE MERGED";  // the path has no quote
  int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) > 1) {
    throw std::runtime_error("diff -u -N failed (is diffutils installed?)");
  }
  return WEXITSTATUS(status);
}

// apply and render: from spec files.
void AddSpecFileVerbs(const Verbs& v, const Kind& kind) {
  Session* s = v.s;
  KindFlags& f = *v.f;
  const Kind* k = &kind;
  auto& actions = *v.actions;

  v.add("apply",
        "Create or update from a spec file (YAML or JSON, several documents; -f - for stdin)",
        [s, k, &f] {
          auto docs = LoadDocuments(*k, f.file, s->Namespace(), s->globals().namespace_name,
                                    /*for_apply=*/true);
          if (f.dry_run_mode != "none") return ApplyDryRun(*s, *k, docs, f.dry_run_mode);
          for (const auto& doc : docs)
            std::cout << k->Apply(*s, doc, f.show_password) << std::flush;
        })
      ->add_option("-f,--filename", f.file, "Spec file, a directory of them, - for stdin")
      ->required();
  kind.AddApplyFlags(actions.back().first, f);
  AddDryRunOption(actions.back().first, f);
  if (kind.HasLogs()) {  // the three workloads
    CLI::App* diff = v.add(
        "diff",
        "What apply -f FILE would change (server-side dry run, then diff -u); exit 0: none, 1: "
        "differences, 2: an error",
        [s, k, &f] {
          int code = 2;
          try {
            code = DiffDocuments(*s, *k, f.file);
          } catch (const std::exception& e) {
            std::cout.flush();
            std::cerr << ErrorLine(e) << "\n";
          }
          ExitNow(code);
        });
    diff->add_option("-f,--filename", f.file, "Spec file, a directory of them, - for stdin")
        ->required();
  }
  CLI::App* render = v.add(
      "render",
      "Print the Kubernetes objects of a spec file for kubectl apply (YAML, or -o json): for the "
      "server's API versions, owned by a root that exists; writes nothing",
      [s, k, &f] { RenderDocuments(*s, *k, f.file, f.offline); });
  render->add_option("-f,--filename", f.file, "Spec file, a directory of them, - for stdin")
      ->required();
  render->add_flag("--offline", f.offline,
                   "Contact no cluster: the namespace is -n, else the kubeconfig context's, else "
                   "default; API versions of Kubernetes >= 1.21; no ownerReferences");
}

// `list --watch` / `get [NAME] --watch`, as kubectl get -w: the workloads now, then a row each
// time one changes (PHASE Deleted when it is gone), until interrupted. From a Fleet (watches
// that survive expiry and server restarts): NAMESPACE NAME OWNER PHASE AGE, -o wide adds
// MESSAGE; -o json one JSON object per change ({"type", "entry"}: the Fleet's change). A row
// the same as the one printed last for that workload is not printed again.
[[noreturn]] void WatchListing(Session& s, const Kind& k, const std::string& only_name) {
  const std::string& output = s.globals().output;
  if (!k.Watchable()) throw ValidationError("watch", k.command(), "quotas cannot be watched");
  if (!output.empty() && output != "wide" && output != "json") {
    throw UsageError("--watch prints a table, -o wide or -o json (one change per line)");
  }
  const FleetKind kind = ParseFleetKind(k.doc_kind());
  const std::string owner = s.globals().owner;
  // Declared before the Fleet, so that its threads (which call back into them) are stopped
  // before these go.
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<FleetChange> changes;
  std::optional<FleetError> fatal;
  FleetOptions options;
  options.namespace_name = s.ListNamespace();
  options.label_selector = s.globals().selector;
  Fleet fleet(s.client(), options);
  if (!fleet.WaitForSync(std::chrono::minutes(1))) {
    throw Timeout(ErrorKind::kTimeout, "the workloads' watches did not sync within 1m");
  }
  fleet.OnChange([&](const FleetChange& c) {
    std::lock_guard<std::mutex> lock(mutex);
    changes.push_back(c);
    changed.notify_one();
  });
  fleet.OnError([&](const FleetError& e) {
    if (!e.failure.fatal) return;
    std::lock_guard<std::mutex> lock(mutex);
    fatal = e;
    changed.notify_one();
  });
  const bool wide = output == "wide";
  std::map<std::pair<std::string, std::string>, std::string> last;  // the row printed last
  auto show = [&](const FleetEntry& e, FleetChangeType type, bool header) {
    if (e.kind != kind || (!owner.empty() && e.owner != owner) ||
        (!only_name.empty() && e.name != only_name)) {
      return;
    }
    if (output == "json") {
      std::cout << FleetChange{type, e}.ToJson().dump() << "\n" << std::flush;
      return;
    }
    const auto now = std::chrono::system_clock::now();
    std::vector<std::string> row{
        e.namespace_name, e.name, e.owner.empty() ? "-" : e.owner,
        type == FleetChangeType::kRemoved ? "Deleted" : e.phase,
        e.created == std::chrono::system_clock::time_point{}
            ? "<unknown>"
            : HumanDuration(std::chrono::duration_cast<std::chrono::nanoseconds>(now - e.created))};
    if (wide) row.push_back(e.message.empty() ? "-" : e.message);
    Rows rows;
    if (header) {
      rows.push_back({"NAMESPACE", "NAME", "OWNER", "PHASE", "AGE"});
      if (wide) rows.front().push_back("MESSAGE");
    }
    rows.push_back(row);
    // Columns as wide as the header's, so rows printed later line up (kubectl does the same).
    std::string text = FormatTextTable(rows);
    if (header) {
      std::cout << text.substr(0, text.find('\n') + 1);
      text = text.substr(text.find('\n') + 1);
    }
    std::string& previous = last[{e.namespace_name, e.name}];
    if (text == previous) return;
    previous = text;
    std::cout << text << std::flush;
  };
  bool header = output != "json";
  for (const auto& e : fleet.Entries()) {
    show(e, FleetChangeType::kAdded, header);
    if (e.kind == kind && (owner.empty() || e.owner == owner) &&
        (only_name.empty() || e.name == only_name)) {
      header = false;
    }
  }
  if (header) {
    std::cout << "NAMESPACE  NAME  OWNER  PHASE  AGE" << (wide ? "  MESSAGE" : "") << "\n"
              << std::flush;
    header = false;
  }
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return !changes.empty() || fatal; });
    if (fatal) std::rethrow_exception(fatal->failure.error);
    FleetChange c = std::move(changes.front());
    changes.pop_front();
    lock.unlock();
    show(c.entry, c.type, false);
  }
}

void Describe(Session& s, const Kind& k, const std::string& name);  // below

// list, get, status and describe.
void AddReadVerbs(const Verbs& v, const Kind& kind) {
  Session* s = v.s;
  KindFlags& f = *v.f;
  const Kind* k = &kind;

  auto list = [s, k, &f] {
    if (f.watch) WatchListing(*s, *k, "");
    PrintListing(*s, *k, Listing(*s, *k, s->globals().output == "wide"));
  };
  CLI::App* list_verb =
      v.add("list", "List them (-A: every namespace, -l: by the spec's labels)", list);
  CLI::App* get =
      v.add("get", "Show one (its stored spec with -o yaml|json), or list them without a name",
            [s, k, &f, list] {
              if (f.watch) WatchListing(*s, *k, f.name);
              if (f.name.empty()) return list();
              std::string ns = k->namespaced() ? s->Namespace() : "";
              const std::string& output = s->globals().output;
              if (Structured(output)) {
                Json object = k->Object(*s, ns, f.name);
                PrintResult("", object.is_null() ? k->Get(*s, ns, f.name) : object, output);
              } else if (output == "name") {
                std::cout << k->command() << "/" << f.name << "\n";
              } else {
                Rows rows = k->List(*s, ns, output == "wide");
                Rows one{rows.front()};
                for (std::size_t i = 1; i < rows.size(); ++i) {
                  if (rows[i][k->namespaced() ? 1 : 0] == f.name) one.push_back(rows[i]);
                }
                std::cout << FormatTextTable(one);
              }
            });
  get->add_option("name", f.name, "The " + kind.doc_kind() + "'s name");
  if (kind.Watchable()) {
    for (CLI::App* verb : {list_verb, get}) {
      verb->add_flag("-w,--watch", f.watch,
                     "After the list, a row each time one changes, until interrupted");
    }
  }
  v.name_arg(v.add("status", "Status table (-o json|yaml for the fields)", [s, k, &f] {
    k->Status(*s, k->namespaced() ? s->Namespace() : "", f.name, s->globals().output);
  }));
  if (!kind.NameLabel().empty()) {
    v.name_arg(v.add("describe",
                     "Name, labels, the status table and the recent events of its objects",
                     [s, k, &f] { Describe(*s, *k, f.name); }));
  }
}

// `describe`: the workload (name, namespace, labels), its status table, then the recent events
// of its objects (those its stored spec renders, and its pods), oldest first, as kubectl
// describe ends with them.
// A string field of a server object ("" when absent, null or not a string: events leave
// fields null).
std::string Text(const Json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}
std::string Text(const Json& value) { return value.is_string() ? value.get<std::string>() : ""; }

void Describe(Session& s, const Kind& k, const std::string& name) {
  const std::string ns = s.Namespace();
  Json object = k.Object(s, ns, name);  // NotFound in the user's terms
  const Json& metadata = object["metadata"];
  std::string labels;
  const Json label_map = metadata.value("labels", Json::object());  // kept: items() borrows
  for (const auto& [key, value] : label_map.items()) {
    labels += (labels.empty() ? "" : ",") + key + "=" + Text(value);
  }
  std::cout << "Name:       " << name << "\nNamespace:  " << ns << "\nKind:       " << k.doc_kind()
            << "\nOwner:      " << Text(object["spec"], "owner")
            << "\nLabels:     " << (labels.empty() ? "<none>" : labels) << "\n\nStatus:\n"
            << std::flush;
  k.Status(s, ns, name, "");
  // Which objects are the workload's, as they exist now: those of the kinds its spec renders
  // and its pods, carrying its name label; events are matched by their UID (as kubectl
  // describe does), so those of an earlier object of the same name are not its.
  Client& client = s.client();
  ListOptions by_label;
  by_label.label_selector = k.NameLabel() + "=" + name;
  std::set<std::pair<std::string, std::string>> kinds{{"v1", "Pod"}};  // apiVersion, kind
  for (const auto& o : k.RenderForApply(s, k.Get(s, ns, name))) {
    kinds.emplace(Text(o, "apiVersion"), Text(o, "kind"));
  }
  std::set<std::string> mine;  // UIDs
  for (const auto& [api_version, kind] : kinds) {
    Json items = client.ListAll(client.Resolve(api_version, kind), ns, by_label)["items"];
    for (const auto& item : items) mine.insert(Text(item["metadata"], "uid"));
  }
  Json events = client.ListAll({"", "v1", "Event", "events", true}, ns);
  struct Row {
    std::string when;
    std::vector<std::string> cells;
  };
  std::vector<Row> rows;
  const auto now = std::chrono::system_clock::now();
  for (const auto& e : events["items"]) {
    const Json about = e.contains("involvedObject") ? e["involvedObject"] : Json::object();
    if (!mine.count(Text(about, "uid"))) continue;
    std::string when = Text(e, "lastTimestamp");
    if (when.empty()) when = Text(e, "eventTime");
    if (when.empty()) when = Text(e["metadata"], "creationTimestamp");
    std::string kind = Text(about, "kind");
    std::transform(kind.begin(), kind.end(), kind.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string message = Text(e, "message");
    std::replace(message.begin(), message.end(), '\n', ' ');
    rows.push_back({when,
                    {Age(when, now), Text(e, "type"), Text(e, "reason"),
                     kind + "/" + Text(about, "name"), message}});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.when < b.when; });
  constexpr std::size_t kShown = 20;  // the most recent
  std::cout << "\nEvents:";
  if (rows.empty()) {
    std::cout << " <none>\n";
    return;
  }
  Rows table{{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}};
  for (std::size_t i = rows.size() > kShown ? rows.size() - kShown : 0; i < rows.size(); ++i) {
    table.push_back(rows[i].cells);
  }
  std::cout << "\n" << FormatTextTable(table);
}

// `delete`: each workload named, selected by -l or described by -f, in turn; one that cannot
// be deleted (NotFound…) is reported on its own error line and the others still are, then exit
// 1, as kubectl does.
void DeleteWorkloads(Session& s, const Kind& k, const KindFlags& f) {
  const std::string& selector = s.globals().selector;
  if (int{!f.names.empty()} + int{!f.file.empty()} + int{!selector.empty()} != 1) {
    throw UsageError("delete takes NAME..., -l SELECTOR or -f FILE (exactly one of them)");
  }
  std::optional<std::chrono::milliseconds> wait;
  if (f.wait) wait = ParseDuration(f.timeout, "--timeout");
  std::vector<std::pair<std::string, std::string>> targets;  // namespace, name
  if (!f.file.empty()) {
    for (const auto& doc : LoadDocuments(k, f.file, k.namespaced() ? s.Namespace() : "",
                                         s.globals().namespace_name)) {
      targets.emplace_back(k.namespaced() ? doc.value("namespace", "") : "", NameOf(doc));
    }
  } else if (!f.names.empty()) {
    for (const auto& name : f.names) {
      targets.emplace_back(k.namespaced() ? s.Namespace() : "", name);
    }
  } else {
    Rows rows = Listing(s, k, false);  // refuses -l for quotas
    for (std::size_t i = 1; i < rows.size(); ++i) targets.emplace_back(rows[i][0], rows[i][1]);
    if (targets.empty()) std::cerr << "No " << k.doc_kind() << "s found\n";
  }
  bool failed = false;
  const bool dry = f.dry_run_mode != "none";
  for (const auto& [ns, name] : targets) {
    try {
      if (dry) {
        DeleteDryRun(s, k, ns, name, f.dry_run_mode);
      } else {
        k.Delete(s, ns, name, wait);
      }
      std::cout << k.command() << "/" << name << " deleted"
                << (dry ? DryRunSuffix(f.dry_run_mode) : "") << "\n"
                << std::flush;
    } catch (const tfk8s::Error& e) {
      std::cerr << ErrorLine(e) << "\n";
      failed = true;
    }
  }
  if (failed) throw Reported();  // exit 1; each failure said why
}

// delete, fits, wait and logs.
void AddLifeVerbs(const Verbs& v, const Kind& kind) {
  Session* s = v.s;
  KindFlags& f = *v.f;
  const Kind* k = &kind;

  CLI::App* del = v.add("delete",
                        "Delete them (cascading): NAME..., -l SELECTOR (with -A: in every "
                        "namespace) or -f FILE; --wait until everything is gone",
                        [s, k, &f] { DeleteWorkloads(*s, *k, f); });
  del->add_option("names", f.names, "The " + kind.doc_kind() + "s' names");
  del->add_option("-f,--filename", f.file,
                  "Spec file, a directory of them, - for stdin: the workloads they describe");
  AddDryRunOption(del, f);
  if (kind.namespaced()) {
    del->add_flag("--wait", f.wait, "Wait until every object is gone");
    del->add_option("--timeout", f.timeout, "Bound of --wait (e.g. 90s, 5m)")
        ->capture_default_str();
  } else {
    del->add_flag(
        "--delete-namespace", f.delete_namespace,
        "Also delete the queue's namespace and everything in it (only a namespace tfk8s created)");
  }
  if (kind.namespaced()) {
    v.add("fits", "Would the spec fit now (quota headroom, node placement)? Exit 1 when not",
          [s, k, &f] {
            auto docs = LoadDocuments(*k, f.file, s->Namespace(), s->globals().namespace_name);
            const std::string& output = s->globals().output;
            bool all = true;
            Json records = Json::array();
            for (const auto& doc : docs)
              all = ReportFit(*k, doc, k->Fits(*s, doc), output, &records) && all;
            if (!records.empty())
              PrintResult("", records.size() == 1 ? records.front() : records, output);
            if (!all) throw Reported();  // exit 1; the report above says why
          })
        ->add_option("-f,--filename", f.file, "Spec file, a directory of them, - for stdin")
        ->required();
  }
  if (!kind.WaitConditions().empty()) {
    CLI::App* w = v.add("wait", "Wait (driven by watches) until the condition holds", [s, k, &f] {
      k->Wait(*s, s->Namespace(), f.name, f.until, ParseDuration(f.timeout, "--timeout"),
              s->globals().output);
    });
    v.name_arg(w);
    f.until = kind.WaitConditions().front();
    w->add_option("--for", f.until, "Condition")
        ->capture_default_str()
        ->check(CLI::IsMember(kind.WaitConditions()));
    w->add_option("--timeout", f.timeout, "How long at most (e.g. 90s, 5m)")->capture_default_str();
  }
  if (kind.HasLogs()) {
    CLI::App* l =
        v.add("logs", "Logs, prefixed by their source (coloured on a terminal)", [s, k, &f] {
          if (f.logs_tail >= 0) f.logs.tail_lines = f.logs_tail;
          if (!f.logs_since.empty()) {
            auto ms = ParseDuration(f.logs_since, "--since").count();
            f.logs.since_seconds = std::max<std::int64_t>(1, (ms + 999) / 1000);
          }
          StreamLines(k->Logs(*s, s->Namespace(), f.name, f.logs));
        });
    v.name_arg(l);
    l->add_flag("-f,--follow", f.logs.follow,
                "Follow until the workload ends (replicas not started yet: when they start)");
    l->add_option("--tail", f.logs_tail, "Only the last N lines of each source (-1: all)")
        ->capture_default_str();
    l->add_option("--since", f.logs_since, "Only lines newer than this (e.g. 30s, 5m, 1h)");
    l->add_flag("--previous", f.logs.previous,
                "The container before its last restart (why a replica crashed)");
    kind.AddLogFlags(l, f);
  }
}

void AddKind(CLI::App& app, Session& session, const Kind& kind, KindFlags& f,
             std::vector<std::pair<CLI::App*, Action>>& actions) {
  CLI::App* cmd = app.add_subcommand(kind.command(), "Work with " + kind.doc_kind() + "s")
                      ->require_subcommand(1);
  const Verbs v{cmd, &session, &f, &actions, kind.doc_kind()};
  AddSpecFileVerbs(v, kind);
  AddReadVerbs(v, kind);
  AddLifeVerbs(v, kind);
  kind.AddOwnVerbs(v);
}

// `tfk8s fits -f FILE`: each document of a file of mixed kinds (each with kind:), checked first,
// then its fit reported; Reported (exit 1) when one does not fit.
void RunFits(Session& session, const std::vector<const Kind*>& kinds,
             const std::string& fits_file) {
  std::vector<std::string> names;
  for (const Kind* k : kinds) names.push_back(k->doc_kind());
  std::vector<KindedDocument> docs;
  std::vector<const Kind*> kind_of;
  for (const auto& [origin, text] : ReadInputs(fits_file)) {
    std::vector<KindedDocument> read = ReadKindedDocuments(text, origin, names);
    for (std::size_t i = 0; i < read.size(); ++i) {  // every document checked before any request
      const Kind* k = *std::find_if(kinds.begin(), kinds.end(),
                                    [&](const Kind* c) { return c->doc_kind() == read[i].kind; });
      const std::string& forced = session.globals().namespace_name;
      CheckDocument(*k, read[i].document, origin + " document " + std::to_string(i + 1),
                    k->namespaced() ? session.Namespace() : "", forced);
      kind_of.push_back(k);
      docs.push_back(std::move(read[i]));
    }
  }
  bool all = true;
  Json records = Json::array();
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const Kind& k = *kind_of[i];
    FitResult fit;
    if (!k.namespaced()) {
      // A queue is not placed anywhere: nothing to check but its own validity (done above).
      fit.notes.push_back("a Quota is not scheduled; only its spec was checked");
    } else {
      fit = k.Fits(session, docs[i].document);
    }
    all = ReportFit(k, docs[i].document, fit, session.globals().output, &records) && all;
  }
  if (!records.empty()) PrintResult("", records, session.globals().output);
  if (!all) throw Reported();
}

// `tfk8s completion SHELL`: the completion script of every command and flag of `app`.
void PrintCompletion(const CLI::App& app, const std::string& shell) {
  std::vector<std::string> globals;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& sn : opt->get_snames()) globals.push_back("-" + sn);
    for (const auto& ln : opt->get_lnames()) globals.push_back("--" + ln);
  }
  CommandNode root;
  root.name = "tfk8s";
  root.flags = globals;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    root.children.push_back(TreeOf(*sub, globals));
  }
  std::cout << (shell == "zsh" ? ZshCompletion(root) : BashCompletion(root));
}

// Ends the process once a command has run: the output is flushed, and nothing is torn down
// (the client's connection thread, the decoded objects, OpenSSL's tables): the system frees it
// all at once, several milliseconds sooner than the destructors would.
[[noreturn]] void ExitNow(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

// What CLI11's "A subcommand is required" means, in kubectl's words: the first word that is
// not a command of the command reached ("unknown command \"frob\" for \"tfk8s tfcluster\""),
// or that a command is missing; both with the commands there are. Global options and their
// values are skipped.
std::string MissingCommand(const CLI::App& app, int argc, char** argv) {
  static const std::set<std::string> kTakesValue = {"-n",           "--namespace", "--context",
                                                    "--kubeconfig", "-o",          "--output",
                                                    "-l",           "--selector",  "--owner"};
  const CLI::App* at = &app;
  std::string path = "tfk8s";
  auto commands = [&at] {
    std::string names;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    return names;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind('-', 0) == 0) {
      if (kTakesValue.count(word)) ++i;  // its value
      continue;
    }
    const CLI::App* sub = nullptr;
    for (const CLI::App* c : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (c->get_name() == word) sub = c;
    }
    if (sub == nullptr) {
      return "unknown command \"" + word + "\" for \"" + path + "\" (one of: " + commands() + ")";
    }
    at = sub;
    path += " " + word;
  }
  return "\"" + path + "\" needs a command (one of: " + commands() + ")";
}

int Run(int argc, char** argv) {
  Globals g;
  Session session(g);
  CLI::App app{"tfk8s: TFClusters, DevInstances, ScheduledJobs and quotas on Kubernetes", "tfk8s"};
  app.fallthrough();
  app.require_subcommand(1);
  app.add_option("-n,--namespace", g.namespace_name, "Namespace (default: the context's)");
  app.add_option("--context", g.context, "Kubeconfig context (default: current-context)");
  app.add_option("--kubeconfig", g.kubeconfig,
                 "Kubeconfig file (default: $KUBECONFIG, ~/.kube/config)");
  app.add_option("-o,--output", g.output,
                 "Output format: json, yaml, wide, name, jsonpath=TEMPLATE, "
                 "jsonpath-as-json=TEMPLATE or custom-columns=NAME:.path,...")
      ->check(CLI::Validator(
          [](std::string& o) -> std::string {
            for (const char* f : {"json", "yaml", "wide", "name"}) {
              if (o == f) return {};
            }
            for (const char* p : {"jsonpath=", "jsonpath-as-json=", "custom-columns="}) {
              if (o.rfind(p, 0) == 0) {
                try {  // checked before any request
                  if (o[0] == 'c') {
                    (void)ParseCustomColumns(std::string_view(o).substr(o.find('=') + 1));
                  } else {
                    (void)JsonPath::Parse(std::string_view(o).substr(o.find('=') + 1));
                  }
                } catch (const ValidationError& e) {
                  return e.server_message();
                }
                return {};
              }
            }
            return "must be json, yaml, wide, name, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE "
                   "or custom-columns=SPEC";
          },
          "FORMAT"));
  app.add_flag("-A,--all-namespaces", g.all_namespaces, "List across every namespace");
  app.add_option(
      "-l,--selector", g.selector,
      "Label selector on the specs' labels (k=v, k!=v, k in (a,b), k notin (a,b), k, !k)");
  app.add_option("--owner", g.owner,
                 "List only the workloads of this user (their tfk8s.io/owner label)");
  app.add_flag("--no-preflight", g.no_preflight,
               "apply, scale, dev start and job run skip the quota and placement pre-flight "
               "(the server and scheduler still decide); `fits` always checks");

  TFClusterCommand tfcluster;
  DevCommand dev;
  JobCommand job;
  QuotaCommand quota;
  KindFlags tf_flags, dev_flags, job_flags, quota_flags;
  std::vector<std::pair<CLI::App*, Action>> actions;
  AddKind(app, session, tfcluster, tf_flags, actions);
  AddKind(app, session, dev, dev_flags, actions);
  AddKind(app, session, job, job_flags, actions);
  AddKind(app, session, quota, quota_flags, actions);

  std::string fits_file;
  CLI::App* fits = app.add_subcommand("fits",
                                      "Would each document of a file (mixed kinds, each with "
                                      "kind:) fit now? Exit 1 when one does not");
  fits->add_option("-f,--filename", fits_file, "Spec file, a directory of them, - for stdin")
      ->required();
  actions.emplace_back(fits, [&] {
    RunFits(session, {&tfcluster, &dev, &job, &quota}, fits_file);
  });

  CLI::App* nodes = app.add_subcommand(
      "nodes", "Node inventory with the seeds' label columns (gputype, cputype, pool)");
  actions.emplace_back(nodes, [&] {
    Inventory inv = GetInventory(session.client());
    PrintResult(FormatInventory(inv), inv.ToJson(), g.output);
  });
  bool client_only = false;
  CLI::App* version = app.add_subcommand("version", "Client and server versions");
  version->add_flag("--client", client_only, "Only the client's version (no server contact)");
  actions.emplace_back(version, [&] {
    Json v = {{"clientVersion", TFK8S_VERSION}};
    if (!client_only) v["serverVersion"] = session.client().ServerVersion();
    std::string text = std::string("Client Version: ") + TFK8S_VERSION + "\n";
    if (!client_only)
      text += "Server Version: " + v["serverVersion"].value("gitVersion", std::string("unknown")) +
              "\n";
    PrintResult(text, v, g.output);
  });
  CLI::App* controller =
      app.add_subcommand("controller",
                         "The platform's loops (alerts, clean-up, culling) as a highly "
                         "available controller in the cluster (docs/controller.md)")
          ->require_subcommand(1);
  ControllerRunFlags controller_flags;
  CLI::App* controller_run =
      controller->add_subcommand("run", "Run the controller until SIGTERM (JSON logs on stderr)");
  AddControllerRunFlags(controller_run, controller_flags);
  actions.emplace_back(controller_run, [&] {
    KubeconfigOptions o;
    o.path = g.kubeconfig;
    o.context = g.context;
    o.namespace_override = g.namespace_name;
    ExitNow(RunController(controller_flags, o, g.selector));
  });
  ControllerManifestFlags manifest_flags;
  CLI::App* controller_manifests = controller->add_subcommand(
      "manifests",
      "What installs the controller: tfk8s controller manifests --image IMAGE | kubectl apply "
      "-f - (-n: its namespace, default tfk8s-system)");
  AddControllerManifestFlags(controller_manifests, manifest_flags);
  actions.emplace_back(controller_manifests, [&] {
    PrintControllerManifests(manifest_flags, g.namespace_name, g.output, g.selector);
  });
  std::string shell;
  CLI::App* completion =
      app.add_subcommand("completion", "Shell completion script: source <(tfk8s completion bash)");
  completion->add_option("shell", shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  actions.emplace_back(completion, [&] { PrintCompletion(app, shell); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    if (message == "A subcommand is required") message = MissingCommand(app, argc, argv);
    std::cerr << "error: usage: " << message << " (see tfk8s --help)\n";
    return kExitUsage;
  }
  if (!g.selector.empty()) {
    try {
      (void)ParseLabelSelector(g.selector);
    } catch (const ValidationError& e) {
      std::string shown = g.selector;
      std::replace(shown.begin(), shown.end(), '\n', ' ');
      std::cerr << "error: usage: -l/--selector \"" << shown << "\": " << e.server_message()
                << " (see tfk8s --help)\n";
      return kExitUsage;
    }
  }
  quota.delete_namespace = quota_flags.delete_namespace;
  try {
    for (auto& [command, action] : actions) {
      if (command->parsed()) {
        action();
        ExitNow(kExitOk);
      }
    }
    std::cerr << "error: usage: no command given (see tfk8s --help)\n";
    return kExitUsage;
  } catch (const UsageError& e) {
    std::cout.flush();
    std::cerr << "error: usage: " << e.what() << " (see tfk8s --help)\n";
    ExitNow(kExitUsage);
  } catch (const std::exception& e) {
    std::cout.flush();
    EndProgress();  // the error line replaces a progress line instead of following it
    std::cerr << ErrorLine(e) << "\n";
    ExitNow(kExitError);
  } catch (const Reported&) {
    ExitNow(kExitError);
  }
}

}  // namespace
}  // namespace tfk8s::cli

int main(int argc, char** argv) { return tfk8s::cli::Run(argc, argv); }
