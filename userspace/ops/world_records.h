#pragma once
// `airlock world show`: which records file an argument names, and its
// records read.
#include <string>

#include "proxy/records.h"

namespace airlock::ops {

// What `world show` reads for its argument: a path as it is; a sandbox's
// name (no '/', not a file here) its records in dir.
std::string world_records_path(const std::string& arg, const std::string& dir);

// The records of a records file as proxy::show_records gives them. Throws
// when the file cannot be opened or read.
proxy::ShowResult read_world_records(const std::string& records, const proxy::ShowOptions&);

}  // namespace airlock::ops
