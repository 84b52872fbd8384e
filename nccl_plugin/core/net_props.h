// SPDX-License-Identifier: Apache-2.0
// Field-by-field copies between the version-neutral NetProperties and the ABI versions'
// ncclNetProperties_vN_t, both ways: the abi/ adapters copy ours out, the delegate
// (core/net_delegate.cc) copies another plugin's in. The field names are NCCL's in every one.
#pragma once

namespace conflux::plugin {

// The fields every version shares (v8 has no forceFlush; see copyV9Props).
template <typename In, typename Out>
void copyCommonProps(const In& in, Out* out) {
  out->name = in.name;
  out->pciPath = in.pciPath;
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->regIsGlobal = in.regIsGlobal;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
  out->netDeviceType = in.netDeviceType;
  out->netDeviceVersion = in.netDeviceVersion;
}

// The v9+ fields (v9 to v12). A virtual device holds up to 4 NICs before v12, 8 from v12: the
// devices are copied one by one, as many as the destination holds.
template <typename In, typename Out>
void copyV9Props(const In& in, Out* out) {
  copyCommonProps(in, out);
  out->forceFlush = in.forceFlush;
  constexpr int cap = int(sizeof(out->vProps.devs) / sizeof(out->vProps.devs[0]));
  const int n = in.vProps.ndevs < 0 ? 0 : in.vProps.ndevs < cap ? in.vProps.ndevs : cap;
  out->vProps.ndevs = n;
  for (int i = 0; i < n; ++i) out->vProps.devs[i] = in.vProps.devs[i];
  out->maxP2pBytes = in.maxP2pBytes;
  out->maxCollBytes = in.maxCollBytes;
}

}  // namespace conflux::plugin
