// confluxd: the Conflux aggregator daemon. Exit codes: 0 after SIGTERM/SIGINT, 1 when it
// cannot start (e.g. a port in use), 2 on a configuration error.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "aggregator/config.h"
#include "aggregator/control/fd_budget.h"
#include "aggregator/daemon/daemon.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using namespace conflux::agg;
  std::vector<std::string> args(argv + 1, argv + argc);
  Config cfg;
  std::string message;
  switch (load_config(args, process_env, &cfg, &message)) {
    case LoadStatus::kExitSuccess:
      std::fputs(message.c_str(), stdout);
      return 0;
    case LoadStatus::kError:
      std::fprintf(stderr, "confluxd: configuration error: %s\n", message.c_str());
      return 2;
    case LoadStatus::kOk:
      break;
  }
  setup_logging(cfg.log_level);
  // Before anything opens a descriptor: the control plane sizes its limits from it.
  raise_nofile_soft_limit();

  // Every thread inherits this mask; the main thread takes the signals with sigwait().
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::string err;
  auto daemon = Daemon::create(cfg, &err);
  if (daemon == nullptr) {
    spdlog::critical("cannot start: {}", err);
    return 1;
  }
  if (err = daemon->start(); !err.empty()) {
    spdlog::critical("cannot start: {}", err);
    return 1;
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {} received: stopping", sig);
  daemon->request_stop();
  daemon->wait();
  return 0;
}
