// A nightly training task with alerts: the seed's scheduled task (the user's PVC at /root,
// `cd <workDir> && python3 /root/<entry> <args>`) as a ScheduledJob. Applies the schedule,
// starts one run now, follows its output, prints the history, and shows the alerts a watcher
// raises (callback, and a webhook when --webhook is given). Then deletes everything.
//   scheduledjob_quickstart [--kubeconfig PATH] [--namespace NS] [--webhook URL] [--fail]
// On the local cluster (tools/tfk8s-local) the node simulator plays the container: --fail
// makes the run exit 1, which retries twice and then raises one failure alert.
#include <tfk8s/scheduledjob.hpp>

#include <ctime>
#include <iomanip>
#include <iostream>
#include <thread>

int main(int argc, char** argv) {
  tfk8s::KubeconfigOptions options;
  std::string ns = "default";
  std::string webhook;
  bool fail = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--fail") {
      fail = true;
    } else if (i + 1 < argc) {
      if (arg == "--kubeconfig") {
        options.path = argv[++i];
      } else if (arg == "--namespace") {
        ns = argv[++i];
      } else if (arg == "--webhook") {
        webhook = argv[++i];
      }
    }
  }
  try {
    tfk8s::Client client = tfk8s::Client::FromDefault(options);

    tfk8s::ScheduledJobSpec spec;
    spec.name = "nightly-train";
    spec.namespace_name = ns;
    spec.image = "tensorflow/tensorflow:2.4.0";
    spec.home_claim = "";                 // e.g. "alice-home": the user's PVC at /root
    spec.working_dir = "projects/mnist";  // relative to /root
    spec.exec_command = "python3";
    spec.exec_args = {"-u"};
    spec.entry_path = "projects/mnist/train.py";
    spec.args = {"--epochs", "3", "--note", "nightly; $(date) stays literal"};
    spec.resources = {"500m", "1Gi", "", "", 0};
    spec.placement.cputype = "xeon-gold";
    spec.backoff_limit = fail ? 2 : 0;    // retries (the seed used 0)
    spec.active_deadline_seconds = 3600;  // timeout of one run
    spec.ttl_seconds_after_finished = 86400;
    spec.schedule = "30 2 * * *";  // 02:30 every night (UTC)
    // For the node simulator only: how the "container" behaves.
    spec.pod_annotations = {{"sim.tfk8s.io/exit-code", fail ? "1" : "0"},
                            {"sim.tfk8s.io/log-lines", "epoch 1/3\nepoch 2/3\nepoch 3/3"}};

    std::cout << "the container runs: " << spec.CommandLine() << "\n";
    tfk8s::ScheduledJob task(client, spec);  // validated here; nothing sent yet

    // Alerts: a callback, and a webhook if one was given. The watcher is usually a long-running
    // service of its own; here it runs on a background thread for the length of the example.
    tfk8s::ScheduledJobWatcherOptions watch;
    watch.namespace_name = ns;
    watch.scheduled_job = spec.name;
    watch.on_alert = [](const tfk8s::ScheduledJobAlert& alert) {
      std::cout << "ALERT " << tfk8s::ToString(alert.kind) << ": " << alert.message << "\n";
    };
    watch.on_error = [](const std::string& problem) {
      std::cerr << "watcher: " << problem << "\n";
    };
    if (!webhook.empty()) {
      watch.webhook = tfk8s::AlertWebhook{};
      watch.webhook->url = webhook;
    }
    tfk8s::ScheduledJobWatcher watcher(client, watch);
    watcher.Start();

    task.Apply();  // quota pre-flight, then the CronJob in the API version the server serves
    tfk8s::ScheduleStatus schedule = task.Status();
    std::time_t next = std::chrono::system_clock::to_time_t(*schedule.next_schedule_time);
    std::tm utc{};
    gmtime_r(&next, &utc);
    std::cout << "CronJob " << spec.name << " (" << schedule.api_version << "), next run at "
              << std::put_time(&utc, "%Y-%m-%dT%H:%M:%SZ") << "\n";

    tfk8s::JobRun run = task.RunNow();  // like kubectl create job --from=cronjob/nightly-train
    std::cout << "started " << run.name << "\n";
    task.FollowLogs({.source = run.name}, [](const tfk8s::WorkloadLogLine& line) {
      std::cout << line.Prefixed() << "\n";  // "[attempt-1] …"
      return true;
    });
    run = task.WaitForRun(run.name, {.timeout = std::chrono::minutes(3)});
    std::cout << "run " << run.name << ": " << tfk8s::ToString(run.result) << " after "
              << run.attempts << " attempt(s)\n\n"
              << tfk8s::FormatRunTable(task.History());

    std::this_thread::sleep_for(std::chrono::seconds(3));  // let the watcher deliver
    watcher.Stop();

    tfk8s::ScheduledJobDeleteOptions del;
    del.wait = std::chrono::minutes(1);
    task.Delete(del);
    std::cout << "deleted; alerts sent: " << watcher.alerts_sent() << "\n";
    return 0;
  } catch (const tfk8s::ValidationError& e) {
    std::cerr << "invalid " << e.field() << ": " << e.what() << "\n";
    return 2;
  } catch (const tfk8s::Error& e) {
    std::cerr << tfk8s::ToString(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
}
