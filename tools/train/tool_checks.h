#pragma once

// Checks the tools run on their input before any work starts, so that a
// bad path or setting is reported at once, with what is wrong, instead of
// after a long run (or never): every message starts with the flag or the
// variable it is about. Shared by ember-train, ember-stress and the benchmarks.
//
// Thread safety: functions; they touch the file system.

#include <string>
#include <string_view>

namespace ember::tools {

// Throws InvalidArgument "<what> 'PATH': <reason>" unless `path` can be
// opened for writing (its directory exists and lets us create it). Leaves
// no file behind where there was none. An empty path passes.
void CheckWritableFile(std::string_view what, const std::string& path);

// Creates `dir` (and its parents) if needed and throws InvalidArgument
// "<what> 'DIR': <reason>" unless a file can be created in it.
void CheckWritableDir(std::string_view what, const std::string& dir);

// What every tool checks first: EMBER_LOG_LEVEL names a level
// (ember::CheckLogLevelFromEnv), ENGINE_TYPE and the EMBER_* engine
// variables parse (EngineOptions::FromEnv), and ENGINE_PROFILE, when set,
// is a writable file (the engine writes it only when it goes, after the
// run). Throws InvalidArgument naming the variable.
void CheckEnvironment();

}  // namespace ember::tools
