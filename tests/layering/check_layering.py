#!/usr/bin/env python3
"""Checks the library layering of inferd: no cycles, no undeclared dependency, no needless link.

Run by ctest (test `layering`, label unit) after every build. Inputs:

- the sources: every `#include "folder/..."` of a file under src/ names a dependency of that
  file's folder (generated protobuf headers count as the proto libraries);
- the link graph CMake generated (build/link_graph.txt, written by CMakeLists.txt: one line
  `target: dep, dep, ...` per inferd target, its LINK_LIBRARIES);
- optionally (--no-dnnl-onnx BINARY ...) test binaries that must link neither oneDNN nor libonnx.

It fails (exit 1, one line per problem) when
1. a folder's production code includes a folder that ALLOWED (below, the intended layering) does
   not list for it: an undeclared dependency;
2. ALLOWED itself, the include graph or the CMake link graph has a cycle;
3. a library links (directly) an inferd library its folder does not include (a needless link, or
   a cycle papered over by repeating libraries), or includes a folder whose library it does not
   link directly;
4. a test file includes a folder whose library is not in its test binary's link closure;
5. a binary given to --no-dnnl-onnx has oneDNN or libonnx in its link closure or in `ldd`;
6. a file outside its folder includes a confined external header (CONFINED_HEADERS: libjpeg and
   libpng only in src/kernels/cpu/image).

Changing the layering means changing ALLOWED here and the folder's paragraph in ARCHITECTURE.md.
"""

import argparse
import pathlib
import re
import subprocess
import sys

# Folder (under src/, or a generated proto library) -> the folders it may include. Keep acyclic.
ALLOWED = {
    "common": set(),
    "testing": {"common"},
    "graph": {"common"},
    "runtime": {"graph", "common"},
    "kernels/cpu": {"runtime", "graph", "common"},
    "optimizer": {"runtime", "graph", "common"},
    "session": {"optimizer", "runtime", "kernels/cpu", "graph", "common"},
    "quantize": {"session", "optimizer", "kernels/cpu", "runtime", "graph", "common"},
    "batching": {"common"},
    "generation": {"session", "quantize", "optimizer", "kernels/cpu", "runtime", "graph",
                   "common"},
    "model_config_proto": set(),
    "grpc_proto": {"model_config_proto"},
    "serving": {"session", "batching", "runtime", "graph", "common", "model_config_proto"},
    "server": {"serving", "session", "batching", "graph", "common", "grpc_proto",
               "model_config_proto"},
    "genserve": {"server", "serving", "generation", "common", "model_config_proto"},
    "loadgen": {"common", "grpc_proto"},
    "batchjob": {"serving", "common"},
    "workqueue": {"batchjob", "serving", "common"},
    "tools": {"workqueue", "batchjob", "genserve", "server", "serving", "loadgen", "quantize", "session", "optimizer", "kernels/cpu",
              "runtime", "graph", "common", "batching", "grpc_proto", "model_config_proto"},
}

# Folder -> its CMake library.
TARGET = {
    "common": "inferd_common",
    "testing": "inferd_testing",
    "graph": "inferd_graph",
    "runtime": "inferd_runtime",
    "kernels/cpu": "inferd_kernels_cpu",
    "optimizer": "inferd_optimizer",
    "session": "inferd_session",
    "quantize": "inferd_quantize",
    "batching": "inferd_batching",
    "generation": "inferd_generation",
    "serving": "inferd_serving",
    "server": "inferd_server",
    "genserve": "inferd_genserve",
    "loadgen": "inferd_loadgen",
    "batchjob": "inferd_batchjob",
    "workqueue": "inferd_workqueue",
    "tools": "inferd_tools_lib",
    "model_config_proto": "inferd_model_config_proto",
    "grpc_proto": "inferd_grpc_proto",
}

# Generated headers (no folder) -> the proto library that provides them.
GENERATED = {
    "model_config.pb.h": "model_config_proto",
    "grpc_service.pb.h": "grpc_proto",
    "grpc_service.grpc.pb.h": "grpc_proto",
}

# Other test programs built by CMake: source -> target.
EXTRA_TESTS = {"tests/conformance/conformance_main.cc": "inferd_conformance"}

# Link-closure entries that mean oneDNN or libonnx; `ldd` library names likewise.
HEAVY_TARGETS = {"DNNL::dnnl", "onnx", "onnx_proto"}
HEAVY_SONAMES = re.compile(r"lib(dnnl|onnx|onnx_proto)\.so")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# External headers only one folder may include (the library is linked for it): header -> folder
# under src/. The image codecs stay in their kernel family (kernels/cpu/image/image_codec.h).
CONFINED_HEADERS = {"jpeglib.h": "kernels/cpu/image", "jerror.h": "kernels/cpu/image",
                    "png.h": "kernels/cpu/image"}
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s+<([^>]+)>', re.M)


def folder_of(rel: str):
    """The ALLOWED folder a path under src/ (or an include path) belongs to, else None."""
    best = None
    for f in TARGET:
        if rel == f or rel.startswith(f + "/"):
            if best is None or len(f) > len(best):
                best = f
    return best


def scan_includes(src: pathlib.Path):
    """(production, tests): folder -> {included folder: [files]}, for files under src/."""
    prod, tests = {}, {}
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc") or not path.is_file():
            continue
        rel = path.relative_to(src).as_posix()
        folder = folder_of(rel)
        if folder is None:
            continue
        is_test = path.name.endswith("_test.cc") or path.name in ("test_util.h", "test_graphs.h")
        table = tests if is_test else prod
        deps = table.setdefault(folder, {})
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            dep = GENERATED.get(inc) or folder_of(inc)
            if dep is not None and dep != folder:
                deps.setdefault(dep, []).append(rel)
    return prod, tests


def check_confined_headers(src: pathlib.Path, problems):
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc") or not path.is_file():
            continue
        rel = path.relative_to(src).as_posix()
        for inc in SYSTEM_INCLUDE.findall(path.read_text(errors="replace")):
            home = CONFINED_HEADERS.get(inc)
            if home is not None and not rel.startswith(home + "/"):
                problems.append(f"src/{rel} includes <{inc}>, which only src/{home} may use")


def read_link_graph(path: pathlib.Path):
    graph = {}
    for line in path.read_text().splitlines():
        if ":" not in line:
            continue
        name, _, deps = line.partition(":")
        graph[name.strip()] = [d.strip() for d in deps.split(",") if d.strip()]
    return graph


def find_cycle(graph):
    """A list of nodes forming a cycle in {node: iterable of nodes}, or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                cycle = visit(m)
                if cycle:
                    return cycle
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            cycle = visit(n)
            if cycle:
                return cycle
    return None


def closure(graph, start):
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        for m in graph.get(n, ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def check_sources(prod, problems):
    for folder, deps in sorted(prod.items()):
        for dep, files in sorted(deps.items()):
            if dep not in ALLOWED[folder]:
                problems.append(f"undeclared dependency: src/{folder} includes {dep} "
                                f"({files[0]}); allowed: {sorted(ALLOWED[folder])}")
    for name, graph in (("allowed-dependency table", ALLOWED),
                        ("include graph", {f: set(d) for f, d in prod.items()})):
        cycle = find_cycle(graph)
        if cycle:
            problems.append(f"cycle in the {name}: {' -> '.join(cycle)}")


def check_links(prod, tests, links, problems):
    cycle = find_cycle(links)
    if cycle:
        problems.append(f"cycle in the CMake link graph: {' -> '.join(cycle)}")
    folder_of_target = {t: f for f, t in TARGET.items()}
    for folder, target in sorted(TARGET.items()):
        if folder in GENERATED.values():
            continue  # generated code: its links follow the .proto imports
        if target not in links:
            problems.append(f"{target} (src/{folder}) missing from the link graph")
            continue
        used = set(prod.get(folder, {}))
        linked = {folder_of_target[d] for d in links[target] if d in folder_of_target}
        for extra in sorted(linked - used):
            problems.append(f"needless link: {target} links {TARGET[extra]} but src/{folder} "
                            f"includes nothing from {extra}")
        for missing in sorted(used - linked):
            problems.append(f"missing link: src/{folder} includes {missing} but {target} does "
                            f"not link {TARGET[missing]}")
    for folder, deps in sorted(tests.items()):
        test_target = TARGET[folder] + "_test"
        check_test(test_target, folder, deps, links, problems)


def check_test(test_target, folder, deps, links, problems):
    if test_target not in links:
        problems.append(f"{test_target} (tests of src/{folder}) missing from the link graph")
        return
    reach = closure(links, test_target)
    for dep, files in sorted(deps.items()):
        if TARGET[dep] not in reach:
            problems.append(f"test dependency not linked: {files[0]} includes {dep} but "
                            f"{test_target} does not link {TARGET[dep]}")


def check_extra_tests(root, links, problems):
    for rel, target in EXTRA_TESTS.items():
        path = root / rel
        if not path.exists():
            continue
        deps = {}
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            dep = GENERATED.get(inc) or folder_of(inc)
            if dep is not None:
                deps.setdefault(dep, []).append(rel)
        check_test(target, rel, deps, links, problems)


def check_light_binaries(binaries, links, problems):
    for binary in binaries:
        path = pathlib.Path(binary)
        target = path.name
        heavy = sorted(closure(links, target) & HEAVY_TARGETS)
        if heavy:
            problems.append(f"{target} links {', '.join(heavy)} (through its libraries)")
        if not path.exists():
            problems.append(f"{binary} does not exist (build it first)")
            continue
        ldd = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        found = sorted(set(HEAVY_SONAMES.findall(ldd)))
        if found:
            problems.append(f"{target} loads {', '.join('lib' + f + '.so' for f in found)} (ldd)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-dir", required=True, type=pathlib.Path)
    ap.add_argument("--link-graph", required=True, type=pathlib.Path)
    ap.add_argument("--no-dnnl-onnx", nargs="*", default=[], metavar="BINARY")
    args = ap.parse_args()

    if not args.link_graph.exists():
        print(f"{args.link_graph} missing: configure the build first (CMakeLists.txt writes it)")
        return 1
    problems = []
    prod, tests = scan_includes(args.source_dir / "src")
    check_sources(prod, problems)
    check_confined_headers(args.source_dir / "src", problems)
    links = read_link_graph(args.link_graph)
    check_links(prod, tests, links, problems)
    check_extra_tests(args.source_dir, links, problems)
    check_light_binaries(args.no_dnnl_onnx, links, problems)
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} problem(s)")
        return 1
    print(f"layering: {len(prod)} folders, {len(links)} targets, no cycle, no undeclared or "
          f"needless dependency")
    return 0


if __name__ == "__main__":
    sys.exit(main())
