// Force-included (-include) into every compile of a TSan build (CMakeLists.txt, INFERD_SANITIZE
// containing "thread"; docs/hardening.md, "The TSan SEGV in ModelManagerTest").
//
// protobuf 3.21's map_field.h gives MapFieldBase two more members (seq1_, seq2_: a tsan-only
// const/mutable access check) when __SANITIZE_THREAD__ is defined, which GCC does for every
// -fsanitize=thread compile. Debian's libprotobuf is built without TSan, so its MapFieldBase has
// the other layout: our instrumented code (the generated *.pb.cc, every inline accessor of a map
// field) and the library disagree on where repeated_field_ and the map live, and the first map
// field parsed from text (Reflection::AddMessage -> MapFieldBase::SyncRepeatedFieldWithMap, in the
// library, calling back into our SyncRepeatedFieldWithMapNoLock) reads a garbage pointer: the SEGV
// at address 0x9 in RepeatedPtrField<..._DoNotUse>::Clear. Reproduced without unity builds and
// without inferd code: a two-message .proto with a map field and TextFormat::ParseFromString.
//
// Including map_field.h here first, with __SANITIZE_THREAD__ hidden, fixes its layout to the
// library's for the whole translation unit (the include guard makes every later #include of it a
// no-op). Only map_field.h is affected: no other protobuf header, nor gRPC's or Abseil's installed
// headers, changes a class layout under __SANITIZE_THREAD__ (checked with grep on Debian 12's
// /usr/include), and every other header keeps seeing the macro (libstdc++'s shared_ptr, Abseil's
// mutex annotations). TSan still instruments all of our code, map fields included; it only loses
// protobuf's seq1_/seq2_ check, which needs an instrumented libprotobuf to mean anything.
#pragma once

#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")
