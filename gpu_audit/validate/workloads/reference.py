"""The built-in reference workload, so ``gpu-audit validate`` works before you plug in your own.

Classical part, every cycle: a small transformer encoder reads a batch of token sequences whose
length changes from cycle to cycle (so the allocator sees a mix of block sizes, as a real
training loop with variable-length batches does), a GRU cell folds the batch's summary into a
recurrent workspace carried from cycle to cycle, and one AdamW step trains both on a synthetic
task. Quantum part, in the quantum stages: a state-vector simulator of random circuits (random
single-qubit rotations and CZ entanglers) in plain torch; lite mode caps it at 16 qubits, full
mode grows it to what a quarter of the memory budget holds (on the CPU, at most 18 qubits, to
keep a cycle under a second). The qubit count cycles through three sizes, each a power of two
apart, and drops by one qubit each time the batch scale halves after an OOM.

Metrics per cycle: ``loss``, ``accuracy``, ``seq_len``, ``batch``, ``workspace_norm`` and, in
quantum stages, ``qubits``, ``depth``, ``norm_error`` (|1 - <psi|psi>|, a correctness check) and
``entropy_per_qubit`` (bits of the output distribution per qubit; it rises towards 1 as the
circuit scrambles the state).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

CPU_FULL_MAX_QUBITS = 18
MIN_QUBITS = 4


@dataclass(frozen=True)
class Sizes:
    d_model: int
    heads: int
    layers: int
    ff: int
    vocab: int
    classes: int
    workspace: int
    batch: int
    seq_lens: tuple[int, ...]
    depth_lite: int
    depth_full: int


CPU_SIZES = Sizes(d_model=64, heads=4, layers=2, ff=128, vocab=512, classes=16, workspace=64,
                  batch=16, seq_lens=(16, 24, 32, 48, 64, 96, 128), depth_lite=10, depth_full=6)
CUDA_SIZES = Sizes(d_model=512, heads=8, layers=4, ff=2048, vocab=8192, classes=64,
                   workspace=512, batch=64, seq_lens=(64, 128, 192, 256, 384, 512, 768, 1024),
                   depth_lite=20, depth_full=12)
# Activation bytes kept for backward per token per layer, roughly (10 * d_model + 2 * ff) floats.
_SAVED_FLOATS_PER_TOKEN_LAYER = 10 * CUDA_SIZES.d_model + 2 * CUDA_SIZES.ff
_PEAK_SHARE = 0.4


def sizes_for(ctx: Any) -> Sizes:
    """CPU sizes keep a cycle in tens of milliseconds on two cores; on a GPU the batch is chosen
    so the classical step peaks near 40% of the memory budget (``--emulate-memory`` included)."""
    if not ctx.is_cuda:
        return CPU_SIZES
    budget = ctx.memory_budget_bytes
    if not budget:
        return CUDA_SIZES
    per_sample = (_SAVED_FLOATS_PER_TOKEN_LAYER * 4 * max(CUDA_SIZES.seq_lens)
                  * CUDA_SIZES.layers)
    batch = int(max(1, min(CUDA_SIZES.batch, _PEAK_SHARE * budget // per_sample)))
    return Sizes(**{**CUDA_SIZES.__dict__, "batch": batch})


class AdamW:
    """AdamW written out: ``torch.optim`` imports ``torch._dynamo`` on first use, which costs
    seconds per worker on a small CPU, and a worker starts for every stage. Same update rule,
    same two moment buffers per parameter (so the same memory), same ``state_dict`` idea."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01) -> None:
        import torch

        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.step_count = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    def step(self) -> None:
        import torch

        self.step_count += 1
        beta1, beta2 = self.betas
        correction1 = 1 - beta1**self.step_count
        correction2 = 1 - beta2**self.step_count
        with torch.no_grad():
            for param, avg, avg_sq in zip(self.params, self.exp_avg, self.exp_avg_sq,
                                          strict=True):
                if param.grad is None:
                    continue
                param.mul_(1 - self.lr * self.weight_decay)
                avg.lerp_(param.grad, 1 - beta1)
                avg_sq.mul_(beta2).addcmul_(param.grad, param.grad, value=1 - beta2)
                denominator = (avg_sq / correction2).sqrt_().add_(self.eps)
                param.addcdiv_(avg, denominator, value=-self.lr / correction1)

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step_count, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_count = state["step"]
        for mine, saved in zip(self.exp_avg + self.exp_avg_sq,
                               state["exp_avg"] + state["exp_avg_sq"], strict=True):
            mine.copy_(saved)


def _build_model(sizes: Sizes) -> Any:
    import torch
    from torch import nn

    class ReferenceModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(sizes.vocab, sizes.d_model)
            self.position = nn.Parameter(torch.zeros(max(sizes.seq_lens), sizes.d_model))
            layer = nn.TransformerEncoderLayer(sizes.d_model, sizes.heads, sizes.ff, dropout=0.0,
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, sizes.layers, enable_nested_tensor=False)
            self.workspace_cell = nn.GRUCell(sizes.d_model, sizes.workspace)
            self.head = nn.Linear(sizes.d_model + sizes.workspace, sizes.classes)

        def forward(self, tokens: Any, workspace: Any) -> tuple[Any, Any]:
            hidden = self.embed(tokens) + self.position[: tokens.shape[1]]
            summary = self.encoder(hidden).mean(dim=1)
            state = self.workspace_cell(summary, workspace.expand(tokens.shape[0], -1))
            return self.head(torch.cat([summary, state], dim=-1)), state.mean(dim=0)

    return ReferenceModel()


class ReferenceWorkload:
    """Transformer encoder + recurrent workspace, plus a random-circuit simulator."""

    def setup(self, ctx: Any) -> None:
        import torch

        self.device = ctx.torch_device()
        self.sizes = sizes_for(ctx)
        torch.manual_seed(ctx.seed)
        self.model = _build_model(self.sizes).to(self.device)
        self.optimizer = AdamW(self.model.parameters(), lr=1e-3)
        self.workspace = torch.zeros(self.sizes.workspace, device=self.device)

    def cycle(self, ctx: Any) -> dict[str, float]:
        import torch
        import torch.nn.functional as F

        # Seeded by cycle index: a resumed run draws the same batches as an unbroken one.
        generator = torch.Generator().manual_seed(ctx.seed * 1_000_003 + ctx.cycle)
        sizes = self.sizes
        seq_len = sizes.seq_lens[ctx.cycle % len(sizes.seq_lens)]
        batch = ctx.scaled(sizes.batch)
        tokens = torch.randint(0, sizes.vocab, (batch, seq_len), generator=generator)
        target = tokens.sum(dim=1) % sizes.classes
        tokens, target = tokens.to(self.device), target.to(self.device)

        logits, workspace = self.model(tokens, self.workspace)
        loss = F.cross_entropy(logits, target)
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.workspace = workspace.detach()
        metrics = {
            "loss": loss.item(),
            "accuracy": (logits.argmax(dim=-1) == target).float().mean().item(),
            "seq_len": seq_len,
            "batch": batch,
            "workspace_norm": self.workspace.norm().item(),
        }
        del logits, loss, tokens, target
        if ctx.quantum != "off":
            metrics.update(self.simulate(ctx, generator))
        return metrics

    def simulate(self, ctx: Any, generator: Any) -> dict[str, float]:
        cap = ctx.max_qubits or 16
        if ctx.quantum == "full" and not ctx.is_cuda:
            cap = min(cap, CPU_FULL_MAX_QUBITS)
        shrink = round(math.log2(1 / ctx.batch_scale)) if ctx.batch_scale < 1 else 0
        qubits = max(MIN_QUBITS, cap - ctx.cycle % 3 - shrink)
        depth = self.sizes.depth_lite if ctx.quantum == "lite" else self.sizes.depth_full
        return run_random_circuit(qubits, depth, generator, self.device)

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "workspace": self.workspace, "sizes": self.sizes.__dict__}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("sizes") != self.sizes.__dict__:
            raise ValueError("the checkpoint was made with other model sizes (a different "
                             "device or memory budget); start a new run")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.workspace = state["workspace"].to(self.device)

    def teardown(self, ctx: Any) -> None:
        del self.model, self.optimizer, self.workspace


def run_random_circuit(qubits: int, depth: int, generator: Any, device: Any) -> dict[str, float]:
    """Simulate a random circuit on ``qubits`` qubits; returns correctness and spread figures."""
    import torch

    state = torch.zeros(2**qubits, dtype=torch.complex64, device=device)
    state[0] = 1.0
    per_layer = min(qubits, 4)
    for _ in range(depth):
        targets = torch.randperm(qubits, generator=generator)[:per_layer].tolist()
        for qubit in targets:
            angles = (torch.rand(3, generator=generator) * 2 * math.pi).tolist()
            state = apply_single(state, rotation(*angles).to(device), qubit, qubits)
        for index in range(0, per_layer - 1, 2):
            apply_cz(state, targets[index], targets[index + 1], qubits)
    probabilities = state.abs().square()
    total = probabilities.sum().item()
    nonzero = probabilities[probabilities > 0]
    entropy = -(nonzero * nonzero.log2()).sum().item()
    return {"qubits": qubits, "depth": depth, "norm_error": abs(1.0 - total),
            "entropy_per_qubit": entropy / qubits}


def rotation(theta: float, phi: float, lam: float) -> Any:
    """The U3 gate."""
    import torch

    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return torch.tensor([[c, -complex(math.cos(lam), math.sin(lam)) * s],
                         [complex(math.cos(phi), math.sin(phi)) * s,
                          complex(math.cos(phi + lam), math.sin(phi + lam)) * c]],
                        dtype=torch.complex64)


def apply_single(state: Any, gate: Any, qubit: int, qubits: int) -> Any:
    """``gate`` (2x2) on ``qubit``: a batched matrix product over the state's other axes."""
    view = state.view(2 ** (qubits - qubit - 1), 2, 2**qubit)
    return (gate @ view).reshape(-1)


def apply_cz(state: Any, first: int, second: int, qubits: int) -> None:
    """Controlled-Z in place: flip the sign where both qubits are 1."""
    low, high = sorted((first, second))
    view = state.view(2 ** (qubits - high - 1), 2, 2 ** (high - low - 1), 2, 2**low)
    view[:, 1, :, 1, :] *= -1
