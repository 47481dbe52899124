// Heap policy of the `inferd` process: large blocks go straight back to the operating system.
//
// glibc serves blocks above its mmap threshold with mmap and unmaps them on free, but the threshold
// is dynamic: each time a mapped block is freed the threshold rises to that block's size (up to
// 32 MiB). Loading a model frees hundreds of multi-MiB buffers (the parsed protobuf's weight bytes
// once copied, each weight's plain copy once a kernel has packed it), so after the first few the
// rest come from the brk heap, where freed memory stays resident. Measured with `inferd bench` on
// BERT-base (peak RSS, ru_maxrss; the file is 418 MiB):
//
//                         glibc default      threshold fixed at 1 MiB
//   batch 1, seq 128      591-675 MiB        531 MiB
//   batch 16, seq 128     803 MiB            530 MiB
//
// (531 MiB is the load itself: `inferd inspect` peaks there too.) Fixing the threshold costs an
// mmap and page faults for each fresh block of 1 MiB or more; the steady-state run allocates none
// but its outputs (the activations live in the planned arena). MALLOC_MMAP_THRESHOLD_ in the
// environment, if set, wins (glibc reads it itself).
#pragma once

namespace inferd::tools {

void UseFixedMmapThreshold();

}  // namespace inferd::tools
