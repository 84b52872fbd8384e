// Backend registry: the one place that knows every compiled-in dataplane.
#include "aggregator/dataplane/dataplane.h"

#include "aggregator/dataplane/udp/udp_dataplane.h"

namespace conflux::agg {

std::unique_ptr<Dataplane> make_dataplane(const Config& cfg, JobTable& jobs, std::string* err) {
  if (cfg.dataplane == "udp") return UdpDataplane::create(cfg, jobs, err);
  *err = "unknown dataplane '" + cfg.dataplane + "'";
  return nullptr;
}

}  // namespace conflux::agg
