// SPDX-License-Identifier: Apache-2.0
// Backend registry: the one place that knows every compiled-in dataplane.
#include "aggregator/dataplane/dataplane.h"

#include "aggregator/dataplane/udp/udp_dataplane.h"
#include "aggregator/util/random.h"
#ifdef CONFLUX_HAVE_DPDK_DATAPLANE
#include "aggregator/dataplane/dpdk/dpdk_dataplane.h"
#endif

namespace conflux::agg {

std::unique_ptr<Dataplane> make_dataplane(const Config& cfg, JobTable& jobs, std::string* err) {
  if (cfg.dataplane == "udp") return UdpDataplane::create(cfg, jobs, err);
#ifdef CONFLUX_HAVE_DPDK_DATAPLANE
  if (cfg.dataplane == "dpdk") return DpdkDataplane::create(cfg, jobs, err);
#endif
  *err = "unknown dataplane '" + cfg.dataplane + "'";
  return nullptr;
}

#ifdef CONFLUX_TEST_HOOKS
std::unique_ptr<FaultInjector> make_fault_injector(const Config& cfg, unsigned queue) {
  if (cfg.fault_drop > 0 || cfg.fault_dup > 0 || cfg.fault_reorder > 0) {
    return std::make_unique<FaultInjector>(cfg.fault_drop, cfg.fault_dup, cfg.fault_reorder,
                                           random_u64() ^ queue);
  }
  return nullptr;
}
#endif

}  // namespace conflux::agg
