#!/usr/bin/env python3
"""The PyTorch peer of ember-bench-train: the same DLRM-style model (model_config.h)
trained in plain PyTorch on the same batches, on the same GPU.

ember-bench-train runs it once:

    python3 tools/train/bench/dlrm_torch_peer.py --spec DIR/spec.json

The spec gives the model's shape (num_dense, bottom_mlp, table_rows, dim,
top_mlp), the optimizer and learning rates, the timing (warmup, steps) and
the batches: files of raw native-endian values, one set per batch
(dense f32 [B, num_dense], labels f32 [B], indices i64 [n], offsets i64
[T*B+1], table-major as Ember's). They are loaded onto the GPU before the
clock starts, as Ember's all-in-GPU run keeps its tables on the GPU.

The model is PyTorch's strongest plain layout: ONE nn.EmbeddingBag of
sum(rows) rows covering every table (table t's indices shifted by its first
row) called once per step, nn.Linear MLPs, DLRM's dot interaction
(torch.bmm and the lower triangle), BCEWithLogitsLoss. Optimizers: sgd ->
SGD, adagrad -> Adagrad (element-wise: PyTorch has no row-wise Adagrad),
adam -> Adam, each with lr (MLPs) or embedding_lr (the table).

PyTorch's fastest settings depend on the shape, so the peer times each
variant of them and reports the fastest:
  sparse  nn.EmbeddingBag(sparse=True); the table's optimizer one that takes
          a sparse gradient, unfused (fused kernels take none): SGD or
          Adagrad (foreach=False), SparseAdam for adam.
  dense   nn.EmbeddingBag(sparse=False): a dense gradient of sum(rows) x dim
          f32; the table's optimizer the same as the MLPs'.
The MLPs' optimizer is fused (fused=True) in both where this torch steps a
fused one on the device (probed once with a tiny parameter: Adagrad has
none on CUDA in some releases), else foreach=True. SGD and Adagrad leave
a row with a zero gradient as it is, so both variants train the same model;
Adam does not (its moments move every row), so for adam the dense variant
is timed and reported but not a candidate for the fastest (SparseAdam's
lazy rule is Ember's). Each variant builds its model afresh from the same
seed (the same initial weights), runs on the same batches, and is skipped
("skipped: ...") where its table, optimizer state and gradient would not
fit in the GPU's free memory.

A step is zero_grad, forward, backward, both optimizers' step; steps cycle
over the batches. Per variant: after `warmup` steps, `steps` steps run with
a torch.cuda.Event recorded between consecutive steps (no sync inside the
loop); a step's time is the interval between its two events, and the median
and the 90th percentile are reported.

Output: one flat JSON object per line on stdout:
  {"info": "torch 2.4.1, CUDA 12.4, NVIDIA H100 80GB HBM3"}
  {"case": "dlrm_variant", "variant": "sparse grads", "table_optimizer":
   "Adagrad", "mlp_optimizer": "foreach Adagrad", "p50_ms": MS, ...}
   (one a variant, the fields of "dlrm" below; or with "error", a
   "skipped: ..." one among them; "note" where it is no candidate)
  {"case": "dlrm", "variant": NAME, "table_optimizer": ..., "mlp_optimizer":
   ..., "p50_ms": MS, "p90_ms": MS, "examples_per_second": N, "steps": N,
   "final_loss": L, "host_p50_ms": MS, "gpu_only_p50_ms": MS}
   (the fastest candidate: the most examples/s)
  {"case": "dlrm", "error": "..."}
  {"error": "...", "unavailable": true}   (no torch, or no CUDA device)
host_p50_ms is the loop's own time a step (the host's time to queue it, and
any wait for the GPU inside it); gpu_only_p50_ms the step's GPU time alone,
measured after the timed steps on steps queued behind a spin kernel (null
when a step waits for the GPU inside, so that none can be queued ahead).
Progress goes to stderr. Exit status: 0 ran, 3 torch or CUDA unavailable,
2 a bad spec. --device cpu runs it on the CPU (host clock), to try the
script without a GPU.
"""

import argparse
import gc
import json
import statistics
import sys
import time


def emit(**fields):
    print(json.dumps(fields), flush=True)


def log(text):
    print(f"[dlrm_torch_peer] {text}", file=sys.stderr, flush=True)


def first_line(e):
    return (str(e).splitlines() or [type(e).__name__])[0][:300]


def mlp(torch, sizes, relu_last, dev):
    layers = []
    for i in range(len(sizes) - 1):
        linear = torch.nn.Linear(sizes[i], sizes[i + 1], device=dev)
        # DLRM's initialization, as Ember's (mlp.h).
        std_w = (2.0 / (sizes[i] + sizes[i + 1])) ** 0.5
        torch.nn.init.normal_(linear.weight, 0.0, std_w)
        torch.nn.init.normal_(linear.bias, 0.0, (1.0 / sizes[i + 1]) ** 0.5)
        layers.append(linear)
        if i + 2 < len(sizes) or relu_last:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def gpu_only_p50(torch, step, first, rounds=8, per_round=4):
    """The step's GPU time alone: the stream is held by a spin kernel while
    the host queues `per_round` steps, which then run back to back with no
    host gap between them. None when the host cannot queue a step ahead
    (the step waits for the GPU inside: a sparse gradient's size is read
    back, for one), so that the step's time is its GPU work plus the host's;
    a step that waits does so every time, so the first such round ends it."""
    spin_cycles = int(4e8)  # about 0.2 s at the H100's clocks
    times = []
    k = first
    for _ in range(rounds):
        torch.cuda.synchronize()
        torch.cuda._sleep(spin_cycles)
        begin = time.perf_counter()
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(per_round + 1)]
        marks[0].record()
        for i in range(per_round):
            step(k)
            k += 1
            marks[i + 1].record()
        queued_s = time.perf_counter() - begin
        ahead = not marks[0].query()  # the spin still runs: every step was queued behind it
        marks[-1].synchronize()
        if not ahead:
            log(f"no GPU-only time: queueing {per_round} steps behind a 0.2 s spin kernel took "
                f"{queued_s * 1e3:.1f} ms, so a step waits for the GPU inside")
            return None
        times += [marks[i].elapsed_time(marks[i + 1]) for i in range(per_round)]
    p50 = statistics.median(times)
    log(f"GPU-only (steps queued ahead, {len(times)} steps): P50 {p50:.3f} ms")
    return p50


def build(torch, spec, dev, sparse):
    T, D = len(spec["table_rows"]), spec["dim"]
    rows = spec["table_rows"]

    class Dlrm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom = mlp(torch, [spec["num_dense"]] + spec["bottom_mlp"] + [D], True, dev)
            pairs = (T + 1) * T // 2
            self.top = mlp(torch, [D + pairs] + spec["top_mlp"] + [1], False, dev)
            self.emb = torch.nn.EmbeddingBag(sum(rows), D, mode=spec["pooling"], sparse=sparse,
                                             include_last_offset=True, device=dev)
            with torch.no_grad():
                start = 0
                for r in rows:
                    bound = (1.0 / r) ** 0.5
                    self.emb.weight[start:start + r].uniform_(-bound, bound)
                    start += r
            li, lj = torch.tril_indices(T + 1, T + 1, offset=-1, device=dev)
            self.register_buffer("li", li)
            self.register_buffer("lj", lj)

        def forward(self, dense, indices, offsets, batch):
            z = self.bottom(dense)
            pooled = self.emb(indices, offsets).view(T, batch, D).transpose(0, 1)
            x = torch.cat([z.unsqueeze(1), pooled], dim=1)  # [B, T+1, D]
            dots = torch.bmm(x, x.transpose(1, 2))[:, self.li, self.lj]
            return self.top(torch.cat([z, dots], dim=1)).squeeze(1)

    return Dlrm()


def fast_mode(torch, cls, dev, **kwargs):
    """"fused" where cls(fused=True) takes a step on `dev` in this torch (a
    probe: some accept fused=True and fail at the step, Adagrad on CUDA),
    else "foreach"."""
    try:
        p = torch.nn.Parameter(torch.zeros(8, device=dev))
        p.grad = torch.ones(8, device=dev)
        cls([p], lr=0.01, fused=True, **kwargs).step()
        return "fused"
    except Exception as e:  # noqa: BLE001 -- TypeError, RuntimeError: no fused kernel
        log(f"{cls.__name__}(fused=True) does not step on {dev}: {first_line(e)}; foreach=True")
        return "foreach"


def time_steps(torch, step, spec, data, cuda):
    """Warm-up, then the timed steps (see the docstring); the figures."""
    warmup, steps = spec["warmup"], spec["steps"]
    for k in range(warmup):
        step(k)
    if cuda:
        torch.cuda.synchronize()
    # A mark between consecutive steps, recorded on the stream without a
    # sync: a step's time is the interval between its marks (the period
    # of the loop, host gaps included), as Ember's step ends.
    loss = None
    examples = 0
    marks = []
    host = []  # the loop's own time per step (queueing the step's work)
    begin = time.perf_counter()
    for k in range(warmup, warmup + steps + 1):
        if cuda:
            marks.append(torch.cuda.Event(enable_timing=True))
            marks[-1].record()
        else:
            marks.append(time.perf_counter())
        if k == warmup + steps:
            break
        queued = time.perf_counter()
        loss = step(k)
        host.append((time.perf_counter() - queued) * 1e3)
        examples += data[k % len(data)][4]
    if cuda:
        marks[-1].synchronize()
        times = [marks[i].elapsed_time(marks[i + 1]) for i in range(steps)]
    else:
        times = [(marks[i + 1] - marks[i]) * 1e3 for i in range(steps)]
    log(f"wall {time.perf_counter() - begin:.3f} s")
    times.sort()
    p50 = statistics.median(times)
    p90 = times[min(len(times) - 1, int(0.9 * (len(times) - 1) + 0.5))]
    host_p50 = statistics.median(host)
    log(f"{steps} steps: P50 {p50:.3f} ms, P90 {p90:.3f} ms; the loop took {host_p50:.3f} ms "
        f"a step (P50)")
    gpu_p50 = gpu_only_p50(torch, step, warmup + steps) if cuda else None
    return dict(p50_ms=p50, p90_ms=p90, examples_per_second=examples / (sum(times) / 1e3),
                steps=steps, final_loss=float(loss.detach()), host_p50_ms=host_p50,
                gpu_only_p50_ms=gpu_p50)


def variants(torch, spec, dev):
    """The variants to time: (name, sparse, make_optimizers(model), table
    optimizer, MLPs' optimizer, note, bytes of table state a table row's
    element, bytes of gradient and temporaries beyond that)."""
    kind, lr, emb_lr = spec["optimizer"], spec["lr"], spec["embedding_lr"]
    cls, extra, states = {
        "sgd": (torch.optim.SGD, {}, 0),
        "adagrad": (torch.optim.Adagrad, {"eps": 1e-8}, 1),
        "adam": (torch.optim.Adam, {}, 2),
    }[kind]
    mode = fast_mode(torch, cls, dev, **extra)
    name = cls.__name__
    fast = {mode: True}

    def mlp_opt(model):
        return cls(list(model.bottom.parameters()) + list(model.top.parameters()), lr=lr,
                   **extra, **fast)

    if kind == "adam":
        sparse_table, sparse_name = (
            lambda model: torch.optim.SparseAdam(list(model.emb.parameters()), lr=emb_lr),
            "SparseAdam")
    else:
        sparse_table, sparse_name = (
            lambda model: cls(model.emb.parameters(), lr=emb_lr, foreach=False, **extra), name)
    dense_note = ("Adam moves every row (its moments), not SparseAdam's lazy rule: "
                  "timed, not a candidate" if kind == "adam" else "")
    # A foreach (not fused) Adagrad or Adam makes a temporary of the table's size.
    dense_temps = 1 if mode == "foreach" and kind != "sgd" else 0
    return [
        ("sparse grads", True, lambda model: [mlp_opt(model), sparse_table(model)],
         sparse_name, f"{mode} {name}", "", states, 0),
        ("dense grads", False,
         lambda model: [mlp_opt(model), cls(model.emb.parameters(), lr=emb_lr, **extra, **fast)],
         f"{mode} {name}", f"{mode} {name}", dense_note, states, 1 + dense_temps),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="spec.json written by ember-bench-train")
    parser.add_argument("--device", default="cuda", help="cuda (the bench), or cpu to try it")
    args = parser.parse_args()
    try:
        with open(args.spec) as f:
            spec = json.load(f)
        T, B = len(spec["table_rows"]), spec["batch"]
        batches = spec["batches"]
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
    where = torch.cuda.get_device_name(dev) if cuda else "CPU"
    emit(info=f"torch {torch.__version__}, CUDA {torch.version.cuda}, {where}")
    # Ember's --tf32: the same allowance for the peer's matmuls (and its bmm).
    torch.backends.cuda.matmul.allow_tf32 = bool(spec.get("tf32", False))

    try:
        row_offsets = [0]
        for r in spec["table_rows"][:-1]:
            row_offsets.append(row_offsets[-1] + r)
        data = []
        for b in batches:
            size = b["batch_size"]
            dense = torch.from_file(b["dense"], size=size * spec["num_dense"],
                                    dtype=torch.float32).view(size, -1)
            labels = torch.from_file(b["labels"], size=size, dtype=torch.float32)
            indices = torch.from_file(b["indices"], size=b["num_indices"], dtype=torch.int64)
            offsets = torch.from_file(b["offsets"], size=T * size + 1, dtype=torch.int64)
            # One EmbeddingBag for all tables: shift table t's indices by its first row.
            shift = torch.zeros(b["num_indices"], dtype=torch.int64)
            for t in range(T):
                shift[offsets[t * size]:offsets[(t + 1) * size]] = row_offsets[t]
            data.append((dense.to(dev), labels.to(dev), (indices + shift).to(dev),
                         offsets.to(dev), size))
        candidates = variants(torch, spec, dev)
    except Exception as e:  # noqa: BLE001 -- out of memory, an old torch: report it
        emit(case="dlrm", error=first_line(e))
        return 0
    loss_fn = torch.nn.BCEWithLogitsLoss()
    table_bytes = sum(spec["table_rows"]) * spec["dim"] * 4
    # A sparse gradient holds a dim-row per lookup, and coalescing it another.
    sparse_bytes = 2 * max(b["num_indices"] for b in batches) * spec["dim"] * 4

    def run_variant(sparse, make_optimizers):
        torch.manual_seed(spec.get("seed", 1))  # the same initial weights in every variant
        model = build(torch, spec, dev, sparse)
        opts = make_optimizers(model)

        def step(k):
            dense, labels, indices, offsets, size = data[k % len(data)]
            for opt in opts:
                opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(dense, indices, offsets, size), labels)
            loss.backward()
            for opt in opts:
                opt.step()
            return loss

        return time_steps(torch, step, spec, data, cuda)

    best, why = None, []
    for name, sparse, make_optimizers, table_opt, mlp_opt, note, states, grads in candidates:
        label = dict(case="dlrm_variant", variant=name, table_optimizer=table_opt,
                     mlp_optimizer=mlp_opt)
        if note:
            label["note"] = note
        if cuda:
            gc.collect()
            torch.cuda.empty_cache()
            need = table_bytes * (1 + states + grads) + (sparse_bytes if sparse else 0)
            free, _ = torch.cuda.mem_get_info(dev)
            if need + (256 << 20) > free:
                reason = (f"skipped: the table, its optimizer state and its "
                          f"{'sparse' if sparse else 'dense'} gradient need about "
                          f"{need / 2**30:.2f} GiB, {free / 2**30:.2f} GiB free")
                log(f"{name}: {reason}")
                emit(**label, error=reason)
                why.append(f"{name}: {reason}")
                continue
        log(f"{name}: table {table_opt}, MLPs {mlp_opt}")
        try:
            figures = run_variant(sparse, make_optimizers)
        except Exception as e:  # noqa: BLE001 -- out of memory, an old torch: this variant
            emit(**label, error=first_line(e))
            why.append(f"{name}: {first_line(e)}")
            continue
        emit(**label, **figures)
        if not note and (best is None or
                         figures["examples_per_second"] > best[1]["examples_per_second"]):
            best = (label, figures)
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
    if best is None:
        emit(case="dlrm", error="no variant ran: " + "; ".join(why or ["none applies"]))
        return 0
    label, figures = best
    log(f"fastest: {label['variant']} ({figures['examples_per_second']:.0f} examples/s)")
    emit(case="dlrm", variant=label["variant"], table_optimizer=label["table_optimizer"],
         mlp_optimizer=label["mlp_optimizer"], **figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
