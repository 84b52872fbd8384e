// SPDX-License-Identifier: Apache-2.0
// conflux-nccl-driver: runs an NCCL net/CollNet plugin exactly as NCCL's proxy would, with host
// memory, in several processes, and verifies every AllReduce result. See README.md.
#include <cstdio>

#include "driver/launcher.h"
#include "driver/options.h"

int main(int argc, char** argv) {
  using namespace conflux::driver;
  Options o;
  Status st = parse_options(argc, argv, &o);
  if (!st.ok()) {
    std::fprintf(stderr, "conflux-nccl-driver: %s\n", st.message().c_str());
    return 2;
  }
  if (o.help) {
    print_usage(argv[0]);
    return 0;
  }
  return o.nranks > 0 ? run_forked(o) : run_from_env(o);
}
