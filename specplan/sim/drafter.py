"""Drafters on the last stage: an EAGLE-style head, a smaller model, prompt lookup.

The head reads [embed(token) | ctx] where ctx is the taps of the token's predecessor (eagle3,
dflash, dspark), or its last hidden state (eagle, mtp); later steps feed the head's own
hidden back. It is stateless (one MLP block, no draft KV), so a draft step is a pure function
of (token, ctx) and every rank of a replica drafts the same tokens from converged inputs.
Tree expansion follows SGLang's select_top_k_tokens / organize_draft_results, so its
parent_list and top_scores_index feed `build_tree` unchanged.
"""

from __future__ import annotations

import torch

from specplan.sim.model import rms_norm


class Head:
    def __init__(self, w: dict, standalone: bool = False):
        self.w, self.standalone = w, standalone

    def step(self, tokens: torch.Tensor, ctx: torch.Tensor, first: bool):
        """One draft forward: (logits [n, vocab], next ctx [n, hidden])."""
        w = self.w
        if self.standalone:
            h = w["small.embed"][tokens]
            h = h + torch.relu(h @ w["small.up"]) @ w["small.down"]
            return rms_norm(h, w["norm"]) @ w["small.lm_head"], h
        h = w["embed"][tokens] + ctx @ (w["draft.fc"] if first else w["draft.step"])
        h = h + torch.relu(rms_norm(h, w["norm"]) @ w["draft.up"]) @ w["draft.down"]
        return rms_norm(h, w["norm"]) @ w["lm_head"], h


def topk_proposal(head: Head, tokens, ctx, k: int):
    """The draft extend: level-0 proposal (topk_index, topk_p float32) and the head's hidden."""
    logits, h = head.step(tokens, ctx, first=True)
    p = torch.softmax(logits, -1)
    top_p, top_i = p.topk(k, -1)
    return top_i, top_p.to(torch.float32), h


def chain(head: Head, first_tokens, ctx, steps: int, first: bool = True) -> torch.Tensor:
    """Greedy chain of `steps` tokens after `first_tokens` [bs]; returns [bs, steps] int64."""
    out, tok = [], first_tokens
    for i in range(steps):
        logits, ctx = head.step(tok, ctx, first=first and i == 0)
        tok = logits.argmax(-1)
        out.append(tok)
    return torch.stack(out, 1) if out else torch.empty(first_tokens.shape[0], 0, dtype=torch.int64)


def eagle_chain(head: Head, proposal, hidden, steps: int) -> torch.Tensor:
    """Chain drafts: the proposal's token, then steps - 1 draft forwards; [bs, steps]."""
    first = proposal[:, 0]
    rest = chain(head, first, hidden, steps - 1, first=False)
    return torch.cat([first[:, None], rest], 1)


def eagle_tree(head: Head, topk_index, topk_p, hidden, steps: int, num_draft: int):
    """SGLang's tree draft: (draft_tokens [bs, N-1], parent_list, top_scores_index)."""
    bs, k = topk_index.shape
    scores = topk_p.to(torch.float64)
    score_list, token_list = [scores[:, None, :]], [topk_index]
    parents = [torch.arange(-1, k, dtype=torch.int64).expand(bs, k + 1)]
    tokens, hid = topk_index, hidden[:, None, :].expand(bs, k, hidden.shape[-1])
    for i in range(1, steps):
        logits, h = head.step(tokens.reshape(-1), hid.reshape(bs * k, hid.shape[-1]), first=False)
        p = torch.softmax(logits, -1)
        step_p, step_i = p.topk(k, -1)
        expand = scores[:, :, None] * step_p.view(bs, k, k)
        scores, pick = expand.flatten(1).topk(k, -1)
        tokens = step_i.view(bs, k * k).gather(1, pick)
        hid = h.view(bs, k, h.shape[-1]).gather(1, (pick // k)[:, :, None].expand(bs, k, h.shape[-1]))
        score_list.append(expand)
        token_list.append(step_i.view(bs, k * k))
        parents.append(pick + (k * k * (i - 1) + k))
    flat_scores = torch.cat([s.flatten(1) for s in score_list], 1)
    flat_tokens = torch.cat(token_list, 1)
    top = flat_scores.topk(num_draft - 1, -1).indices.sort(-1).values
    parent_list = torch.cat(parents[:-1], 1) if steps > 1 else torch.empty(bs, 0, dtype=torch.int64)
    return flat_tokens.gather(1, top), parent_list, top


def chain_tree(bs: int, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A chain as build_tree inputs (topk 1): parent_list [bs, steps], selected [bs, steps]."""
    parent = torch.arange(-1, steps - 1, dtype=torch.int64).expand(bs, steps).contiguous()
    selected = torch.arange(steps, dtype=torch.int64).expand(bs, steps).contiguous()
    return parent, selected


def ngram_lookup(tokens: list[int], width: int, max_n: int = 3) -> list[int]:
    """Prompt lookup: the tokens after the latest earlier match of the longest suffix n-gram."""
    for n in range(min(max_n, len(tokens) - 1), 0, -1):
        suffix = tokens[-n:]
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start:start + n] == suffix:
                follow = tokens[start + n:start + n + width]
                return follow + [follow[-1]] * (width - len(follow))
    return [tokens[-1]] * width
