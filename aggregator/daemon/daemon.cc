// SPDX-License-Identifier: Apache-2.0
#include "aggregator/daemon/daemon.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "conflux/common/reduce.h"
#include "conflux/common/thread_name.h"
#include "fmt/format.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace conflux::agg {

Daemon::Daemon(const Config& cfg) : cfg_(cfg) {}

std::unique_ptr<Daemon> Daemon::create(const Config& cfg, std::string* err) {
  std::unique_ptr<Daemon> d(new Daemon(cfg));
  d->jobs_ = std::make_unique<JobTable>(static_cast<unsigned>(cfg.max_jobs),
                                        static_cast<unsigned>(cfg.threads));
  d->dataplane_ = make_dataplane(d->cfg_, *d->jobs_, err);
  if (d->dataplane_ == nullptr) return nullptr;
  if (!d->cfg_.multicast_range.empty() && !d->dataplane_->can_multicast()) {
    *err = "'multicast_range' is set but the " + std::string(d->dataplane_->name()) +
           " dataplane cannot send multicast results";
    return nullptr;
  }
  d->control_ = ControlPlane::create(d->cfg_, *d->jobs_, *d->dataplane_, err);
  if (d->control_ == nullptr) return nullptr;
  return d;
}

Daemon::~Daemon() {
  request_stop();
  wait();
}

Status Daemon::start() {
  CFX_TRY(dataplane_->start());
  control_thread_ = std::thread([this] {
    name_this_thread("cfx-control");
    control_->run();
  });
  started_ = true;
  spdlog::info(
      "confluxd listening: control {}:{}, data ports {}, metrics {}, {} dataplane, "
      "reduction isa {}{}",
      cfg_.listen, control_port(), fmt::join(data_ports(), ","), metrics_port(), dataplane_->name(),
      reduce::active_isa(), cfg_.secret.empty() ? "" : ", authentication on");
  if (!cfg_.ready_file.empty()) {
    return write_ready_file(cfg_.ready_file, control_port(), metrics_port(), data_ports());
  }
  return {};
}

void Daemon::request_stop() {
  if (control_ != nullptr) control_->request_stop();
}

void Daemon::wait() {
  if (!started_) return;
  if (control_thread_.joinable()) control_thread_.join();
  dataplane_->stop();
  started_ = false;
  spdlog::info("confluxd stopped");
}

Status write_ready_file(const std::string& path, uint16_t control_port, int metrics_port,
                        const std::vector<uint16_t>& data_ports) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  const std::string text =
      fmt::format("control_port={}\nmetrics_port={}\ndata_ports={}\npid={}\n", control_port,
                  metrics_port, fmt::join(data_ports, ","), getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return system_error(fmt::format("ready_file '{}': {}", tmp, std::strerror(errno)));
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    return system_error(fmt::format("ready_file '{}': write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return system_error(fmt::format("ready_file '{}': {}", path, std::strerror(errno)));
  }
  return {};
}

void setup_logging(const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>("confluxd",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e [%n] %l: %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace conflux::agg
