#!/usr/bin/env python3
"""The PyTorch peer of ember-bench-ops: nn.EmbeddingBag and torch.optim on
the same shape and the same indices as Ember's TBE, on the same GPU.

ember-bench-ops runs it once per shape:

    python3 tools/bench/ops/tbe_torch_peer.py --spec DIR/spec.json

The spec names the batch files (raw indices and offsets in the spec's index
dtype, table-major as Ember's: table t's B*L indices, each in [0, rows), then
table t+1's; T*B+1 offsets) and the timing scheme. The layout is PyTorch's
strongest plain one: ONE nn.EmbeddingBag of T*rows rows covering every table,
table t's indices shifted by t*rows, one call for all T*B bags (its output is
[T*B, D], table-major, where Ember's is [B, T*D]).

Cases, each timed with torch.cuda.Event over `iters` iterations after the
warm-up, `repeat` runs, the median reported:
  forward           emb(indices, offsets) under torch.no_grad()
  forward_autograd  the same with autograd on (as in training)
  sgd_dense         out.backward(grad, retain_graph=True); opt.step();
  sgd_sparse        opt.zero_grad(set_to_none=True) -- one forward before the
  adagrad_dense     loop, not timed; `grad` a fixed random [T*B, D]. sparse:
  adagrad_sparse    nn.EmbeddingBag(sparse=True), PyTorch's fast path for
                    embeddings. torch.optim.SGD(lr); torch.optim.Adagrad(lr,
                    eps) is element-wise (a state per element; PyTorch has no
                    row-wise Adagrad), its closest to Ember's row-wise one.
A sparse case whose gradient (T*B*L x D f32) would not fit twice is skipped.

Output: one flat JSON object per line on stdout (ops_peer.h parses them):
  {"info": "..."}
  {"case": NAME, "ms": MEDIAN, "iters": N, "repeat": R, "runs": "MS MS MS"}
  {"case": NAME, "error": "..."}
  {"error": "...", "unavailable": true}   (no torch, or no CUDA device)
Progress goes to stderr. Exit status: 0 ran (a case may have failed), 3
torch or CUDA unavailable, 2 a bad spec.
"""

import argparse
import json
import math
import statistics
import sys
import time


def emit(**fields):
    print(json.dumps(fields), flush=True)


def log(text):
    print(f"[tbe_torch_peer] {text}", file=sys.stderr, flush=True)


def measure(torch, fn, spec, cuda):
    """Median ms per iteration of fn over spec["repeat"] runs (see above)."""
    for _ in range(spec["warmup"]):
        fn()
    if cuda:
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)

    def timed(iters):
        if not cuda:  # --device cpu: a smoke test of this script, host clock
            begin = time.perf_counter()
            for _ in range(iters):
                fn()
            return (time.perf_counter() - begin) * 1e3
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    one = max(timed(1), 1e-3)
    iters = int(min(spec["max_iters"], max(spec["min_iters"], math.ceil(spec["time_ms"] / one))))
    runs = [timed(iters) / iters for _ in range(spec["repeat"])]
    return statistics.median(runs), iters, runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="spec.json written by ember-bench-ops")
    parser.add_argument("--device", default="cuda",
                        help="cuda (the bench), or cpu to try this script without a GPU")
    args = parser.parse_args()
    try:
        with open(args.spec) as f:
            spec = json.load(f)
        T, L, B = spec["tables"], spec["pooling"], spec["batch"]
        rows, D = spec["rows"], spec["dim"]
    except (OSError, ValueError, KeyError) as e:
        emit(error=f"bad spec {args.spec}: {e}")
        return 2
    try:
        import torch
    except Exception as e:  # noqa: BLE001 -- any import failure means no peer
        emit(error=f"no torch in {sys.executable}: {e}", unavailable=True)
        return 3
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        emit(error=f"torch {torch.__version__} sees no CUDA device", unavailable=True)
        return 3
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    torch.manual_seed(spec.get("seed", 1))
    where = torch.cuda.get_device_name(dev) if cuda else "CPU"
    emit(info=f"torch {torch.__version__}, CUDA {torch.version.cuda}, {where}")
    dtype = torch.int64 if spec["index_dtype"] == "int64" else torch.int32
    n = T * B * L
    indices = torch.from_file(spec["indices"], size=n, dtype=dtype).to(dev)
    offsets = torch.from_file(spec["offsets"], size=T * B + 1, dtype=dtype).to(dev)
    if T * rows > 2**31 - 1 and dtype == torch.int32:  # shifted indices need int64
        dtype = torch.int64
        indices, offsets = indices.long(), offsets.long()
    shift = torch.arange(T, device=dev, dtype=dtype).mul_(rows).view(T, 1)
    indices.view(T, B * L).add_(shift)
    emb = torch.nn.EmbeddingBag(T * rows, D, mode="sum", include_last_offset=True, device=dev)
    with torch.no_grad():
        emb.weight.uniform_(-0.01, 0.01)
    grad = torch.randn(T * B, D, device=dev).mul_(0.01)
    sync()

    def run_case(name, fn):
        try:
            ms, iters, runs = measure(torch, fn, spec, cuda)
        except Exception as e:  # noqa: BLE001 -- torch.cuda.OutOfMemoryError among them
            emit(case=name, error=(str(e).splitlines() or [type(e).__name__])[0][:300])
            return
        finally:
            sync()
        log(f"T={T} L={L} B={B}: {name} {ms:.3f} ms ({iters} iterations)")
        emit(case=name, ms=ms, iters=iters, repeat=len(runs),
             runs=" ".join(f"{r:.6g}" for r in runs))

    emb.sparse = False
    with torch.no_grad():
        run_case("forward", lambda: emb(indices, offsets))
    run_case("forward_autograd", lambda: emb(indices, offsets))

    # The sparse gradient holds a D-row per lookup, and coalescing it takes
    # more: a case that cannot fit twice that is skipped; one that runs out
    # of memory anyway reports it.
    sparse_bytes = 2 * n * D * 4

    def backward_case(name, sparse, make_optimizer):
        if sparse and cuda:
            free, _ = torch.cuda.mem_get_info(dev)
            if sparse_bytes > free:
                emit(case=name, error=f"skipped: the sparse gradient needs about "
                     f"{sparse_bytes / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free")
                return
        emb.sparse = sparse
        out = opt = None
        try:
            opt = make_optimizer()
            out = emb(indices, offsets)  # once: the loop is backward + step only

            def step():
                out.backward(grad, retain_graph=True)
                opt.step()
                opt.zero_grad(set_to_none=True)

            run_case(name, step)
        except Exception as e:  # noqa: BLE001 -- out of memory, an old torch: the case only
            emit(case=name, error=(str(e).splitlines() or [type(e).__name__])[0][:300])
        finally:
            out = None
            opt = None
            emb.weight.grad = None
            if cuda:
                torch.cuda.empty_cache()

    w = emb.weight
    lr_sgd, lr_ada, eps = spec.get("sgd_lr", 0.01), spec.get("adagrad_lr", 0.01), \
        spec.get("adagrad_eps", 1e-8)
    backward_case("sgd_dense", False, lambda: torch.optim.SGD([w], lr=lr_sgd))
    backward_case("sgd_sparse", True, lambda: torch.optim.SGD([w], lr=lr_sgd, foreach=False))
    backward_case("adagrad_dense", False, lambda: torch.optim.Adagrad([w], lr=lr_ada, eps=eps))
    backward_case("adagrad_sparse", True,
                  lambda: torch.optim.Adagrad([w], lr=lr_ada, eps=eps, foreach=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
