// The candidate names of an autotune call site whose configs are a table of structs with a
// `name` (autotune::run takes the names; the table stays the one list of configs).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace tileops {
namespace cuda {

template <class Config, size_t N>
std::vector<std::string> config_names(const Config (&configs)[N]) {
  std::vector<std::string> v;
  for (const Config& c : configs) v.emplace_back(c.name);
  return v;
}

}  // namespace cuda
}  // namespace tileops
