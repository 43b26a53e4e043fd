"""Token log-probabilities and the clipped policy-gradient loss (GRPO with DAPO's separate clip range).

loss = -(1 / sum(mask)) * sum_t mask_t * [min(r_t A_t, clip(r_t, 1 - eps_low, 1 + eps_high) A_t) - beta * KL_t]
with r_t = exp(logp_t - logp_old_t) and KL_t the k3 estimator exp(ref - logp) - (ref - logp) - 1 (GRPO).
The mean runs over every response token of the batch (token-level, as in DAPO / EVisRAG eq. 10), and the
mask is 1 only on tokens the policy generated: prompts, observations and padding never carry gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """log p(input_ids[t] | < t) aligned with input_ids; position 0 (no context) gets 0."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    picked = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)


@dataclass
class LossStats:
    loss: float
    pg_loss: float
    kl: float
    clip_frac: float
    tokens: int


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    n_tokens: int | float | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """All tensors [batch, seq]; `n_tokens` = the normaliser when a batch is split in micro-batches."""
    mask = mask.float()
    denom = float(n_tokens) if n_tokens else float(mask.sum().clamp(min=1.0))
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    objective = torch.minimum(unclipped, clipped)
    kl = torch.zeros_like(logp)
    if ref_logp is not None and kl_coef > 0:
        diff = ref_logp - logp
        kl = torch.exp(diff) - diff - 1.0
    per_token = -(objective - kl_coef * kl)
    loss = (per_token * mask).sum() / denom
    with torch.no_grad():
        was_clipped = ((objective - unclipped).abs() > 1e-12).float()  # the clipped branch is active
        stats = LossStats(
            loss=float(loss),
            pg_loss=float((-objective * mask).sum() / denom),
            kl=float((kl * mask).sum() / denom),
            clip_frac=float((was_clipped * mask).sum() / max(float(mask.sum()), 1.0)),
            tokens=int(mask.sum()),
        )
    return loss, stats
