// SPDX-License-Identifier: Apache-2.0
// JSON text through one library (nlohmann::json): the layouts and number forms of Conflux's
// JSON reports. Documents are built as json::Json (keys in insertion order) and dumped here.
// Nothing here throws: a string that is not valid UTF-8 is written with U+FFFD in place of the
// bad bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace conflux::json {

using Json = nlohmann::ordered_json;

// No white space: {"a":1,"b":[2,3]}.
std::string compact(const Json& j);
// One line, ", " between items and ": " after keys: {"a": 1, "b": [2, 3]}.
std::string one_line(const Json& j);
// Two levels of lines, each deeper item on one line (one_line):
//   {
//     "name": "x",
//     "rows": [
//       {"a": 1, "b": 2}
//     ]
//   }
// An empty list is "[]", or with `open_empty` "[\n  ]" (the driver's report).
std::string lines(const Json& j, bool open_empty = false);

// Numbers that print as the printf/fmt forms the reports used before the library:
// fixed(v, d) is v rounded as printf("%.*f", d, v) rounds it. With d == 1 it prints the same
// bytes below 1e15 ("12.0", "0.5"); with more decimals the trailing zeros go ("1.5", not
// "1.5000").
Json fixed(double v, int decimals);
// v to 6 significant digits, as printf("%.6g") and ostream's default round it; whole numbers
// as integers ("100"). From 1e6 to 1e15 printf wrote an exponent ("1.23457e+06"), this the
// same number in full ("1234570").
Json sig6(double v);
// v as fmt's "{}" writes it: whole numbers below 1e16 as integers ("100"), others as the
// shortest form that reads back as v.
Json shortest(double v);

}  // namespace conflux::json
