"""One optimiser step of the policy on a rollout batch (kept apart from the loop so it can be tested alone)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch

from vrag_data.train.loss import policy_loss, token_logprobs

if TYPE_CHECKING:  # annotations only; importing them here would be circular
    from vrag_data.train.episode import Episode
    from vrag_data.train.model import Policy


def training_rows(episodes: list[Episode], advs: list[list[list[float]]]) -> list[dict[str, Any]]:
    rows = []
    for ep, per_turn in zip(episodes, advs, strict=True):
        for s, a in zip(ep.samples, per_turn, strict=True):
            if not s.response_ids:
                continue
            ids = s.context_ids + s.response_ids
            mask = [0] * len(s.context_ids) + [1] * len(s.response_ids)
            adv = [0.0] * len(s.context_ids) + list(a)
            rows.append({"ids": ids, "mask": mask, "adv": adv, "pixel_values": s.pixel_values,
                         "image_grid_thw": s.image_grid_thw})
    return rows


def _batch(rows: list[dict[str, Any]], policy: Policy, device: Any) -> dict[str, torch.Tensor]:
    width = max(len(r["ids"]) for r in rows)
    n = len(rows)
    ids = torch.full((n, width), policy.pad_id, dtype=torch.long)
    attn = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width))
    adv = torch.zeros((n, width))
    for i, r in enumerate(rows):
        k = len(r["ids"])
        ids[i, :k] = torch.tensor(r["ids"])
        attn[i, :k] = 1
        mask[i, :k] = torch.tensor(r["mask"], dtype=torch.float)
        adv[i, :k] = torch.tensor(r["adv"])
    out = {"input_ids": ids.to(device), "attention_mask": attn.to(device), "mask": mask.to(device),
           "adv": adv.to(device), "mm_token_type_ids": ((ids == policy.image_token_id).long() * attn).to(device)}
    pix = [r["pixel_values"] for r in rows if r["pixel_values"] is not None]
    if pix:
        out["pixel_values"] = torch.cat(pix).to(device)
        out["image_grid_thw"] = torch.cat([r["image_grid_thw"] for r in rows if r["image_grid_thw"] is not None]).to(device)
    return out


def _logp(model: Any, b: dict[str, torch.Tensor]) -> torch.Tensor:
    """Run under the policy's autocast (`Policy.autocast`); the log-softmax itself is taken in fp32."""
    kwargs = {k: b[k] for k in ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values", "image_grid_thw") if k in b}
    if "pixel_values" in kwargs:
        kwargs["pixel_values"] = kwargs["pixel_values"].to(next(model.parameters()).dtype)
    logits = model(**kwargs, use_cache=False).logits
    return token_logprobs(logits, b["input_ids"])



def update_policy(policy: Any, ref: Any, optimizer: Any, params: list[torch.nn.Parameter],
                  rows: list[dict[str, Any]], rl: Any, world: int = 1) -> dict[str, float]:
    """pi_old (and pi_ref) log-probs once, then `rl.updates_per_step` passes of clipped-loss gradient steps.

    Forwards run under the policy's autocast; the parameters (fp32 master weights unless pure bf16) take the
    optimizer step in their own dtype.

    Micro-batches accumulate gradients; the loss is normalised by the token count of the whole batch, so the
    result does not depend on the micro-batch size. With several processes, gradients are averaged over ranks
    every pass (a rank without rows contributes zeros rather than skipping the collective).
    """
    model = policy.model
    device = next(model.parameters()).device
    n_tokens = sum(sum(r["mask"]) for r in rows)
    mb = max(1, rl.micro_batch_size)
    acc = {"loss": 0.0, "kl": 0.0, "clip": 0.0, "tokens": float(n_tokens)}
    autocast = getattr(policy, "autocast", contextlib.nullcontext)
    with torch.no_grad(), autocast():
        for i in range(0, len(rows), mb):
            chunk = rows[i : i + mb]
            b = _batch(chunk, policy, device)
            old = _logp(model, b)
            refp = _logp(ref, b) if ref is not None else None
            for j, r in enumerate(chunk):
                r["old"] = old[j, : len(r["ids"])].cpu()
                r["ref"] = refp[j, : len(r["ids"])].cpu() if refp is not None else None
    passes = max(1, rl.updates_per_step)
    for _ in range(passes):
        optimizer.zero_grad(set_to_none=True)
        for i in range(0, len(rows), mb):
            chunk = rows[i : i + mb]
            b = _batch(chunk, policy, device)
            old = torch.zeros_like(b["adv"])
            refp = torch.zeros_like(b["adv"]) if ref is not None else None
            for j, r in enumerate(chunk):
                old[j, : len(r["ids"])] = r["old"]
                if refp is not None:
                    refp[j, : len(r["ids"])] = r["ref"]
            with autocast():
                logp = _logp(model, b)
            loss, st = policy_loss(logp, old, b["adv"], b["mask"], rl.clip_low, rl.clip_high, refp, rl.kl_coef, n_tokens)
            loss.backward()
            acc["loss"] += st.loss / passes
            acc["kl"] += st.kl / passes
            acc["clip"] += st.clip_frac * st.tokens / max(n_tokens, 1) / passes
        if world > 1:
            for p in params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                torch.distributed.all_reduce(p.grad)
                p.grad /= world
        if rows or world > 1:
            torch.nn.utils.clip_grad_norm_(params, rl.max_grad_norm)
            optimizer.step()
    return acc
