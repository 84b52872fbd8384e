// Backend registry: the one place that knows every compiled-in dataplane.
#include "aggregator/dataplane/dataplane.h"

#include "aggregator/dataplane/udp/udp_dataplane.h"
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

}  // namespace conflux::agg
