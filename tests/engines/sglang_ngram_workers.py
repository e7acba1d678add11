"""Rank programs for the SGLang plugin's `ngram_draft` site: SGLang 0.5.23's real
`NGRAMWorker._prepare_draft_tokens` (hooked), on a worker whose n-gram corpus differs per rank.
Run like sglang_workers.py; each returns, per round, what the rank ends with and what it would
hold alone (`own`), as sglang_site_workers.py's do.

SGLang's NgramCorpus (cpp_ngram/ngram_corpus.py) is real; the compiled corpus object it wraps
(a C++ extension built at run time through tvm_ffi's JIT: not buildable here) stands in as
`_CompiledCorpus`, a small n-gram matcher with the same methods and return types
(`match_stateful` -> int64 drafts [bs * d], int64 0/1 mask [bs * d * d]). Each rank loads the
same external corpus through NGRAMWorker's real `add_external_corpus` / `commit_corpus_load`,
but at another round (rank r before round r), and each DP-attention replica's corpus continues
the requests differently, so ranks draft different trees from the same requests. `sgl_kernel`
(SGLang's native CPU kernels, imported by ngram_worker's tree and cache-loc kernels, which
`_prepare_draft_tokens` never calls) is stubbed in these processes only.
"""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sglang_site_workers  # noqa: E402
import sglang_workers  # noqa: E402

BS = 4  # requests


def main(argv: list[str]) -> None:
    sglang_workers.WORKERS.update(WORKERS)
    sglang_workers.main(argv)


class _CompiledCorpus:
    """Stands for SGLang's compiled corpus object: the last token of a request's tail is looked
    up in the loaded sequences and its continuation drafted as a chain (node 0: the last token;
    unmatched nodes: token 0 under the root)."""

    def __init__(self, *, draft_token_num: int, **kwargs):
        self.d, self.seqs = draft_token_num, []

    def synchronize(self) -> None:
        pass

    def load_external_corpus_named(self, corpus_id, chunks, budget):
        chunks = [list(c) for c in chunks]
        self.seqs.extend(chunks)
        return True, sum(map(len, chunks))

    def match_stateful(self, state_ids, batch_tokens, total_lens):
        import numpy as np

        d = self.d
        tokens = np.zeros((len(batch_tokens), d), dtype=np.int64)
        mask = np.zeros((len(batch_tokens), d, d), dtype=np.int64)
        for b, tail in enumerate(batch_tokens):
            follow = next((s[s.index(tail[-1]) + 1:] for s in reversed(self.seqs) if tail[-1] in s[:-1]), [])
            chain = follow[: d - 1]
            tokens[b, 0], tokens[b, 1:1 + len(chain)] = tail[-1], chain
            for i in range(d):
                mask[b, i, 0] = mask[b, i, i] = 1
                if i <= len(chain):
                    mask[b, i, :i + 1] = 1
        return tokens.reshape(-1), mask.reshape(-1)


def _corpus_for(rank: int) -> list[list[int]]:
    """The external corpus: request i's tail (10 i + 1, 10 i + 2) continued per replica."""
    off = 50 * (rank // 2)
    return [[10 * i + 1, 10 * i + 2, 500 + 10 * i + off, 501 + 10 * i + off, 502 + 10 * i + off]
            for i in range(BS)]


def draft(topology: str, speculative: str, forge: str = "", width: str = "") -> dict:
    """`width`: the worker drafts that many tokens per request instead of the engine's setting
    (the start-up check refuses such a deployment; here it drives the plugin's fallback)."""
    import numpy as np

    import sglang_harness

    finder = next(f for f in sys.meta_path if isinstance(f, sglang_harness._StubFinder))
    finder.names.add("sgl_kernel")  # native CPU kernels imported along the way, never called here
    spec = json.loads(speculative)
    out = sglang_workers.start_engine(json.loads(topology), spec)
    import sglang.srt.speculative.cpp_ngram.ngram_corpus as ngram_corpus
    from sglang.srt.speculative.ngram_worker import NGRAMWorker

    ngram_corpus.get_ngram_corpus_cls = lambda: _CompiledCorpus
    d = int(width) if width else spec["speculative_num_draft_tokens"]
    rounds = sglang_site_workers.Rounds(forge)
    worker = NGRAMWorker.__new__(NGRAMWorker)  # __init__ reads a whole scheduler's config
    worker.draft_token_num, worker.max_trie_depth, worker.enable_overlap = d, 4, False
    worker.ngram_corpus = ngram_corpus.NgramCorpus(max_trie_depth=4, draft_token_num=d)
    reqs = [SimpleNamespace(rid=f"req-{i}", origin_input_ids_unpadded=[7, 10 * i + 1],
                            output_ids=[10 * i + 2]) for i in range(BS)]
    batch = SimpleNamespace(reqs=reqs)

    def one_round(rnd: int) -> dict:
        if rnd == rounds.rank:  # this rank's external corpus commits now (ranks differ in when)
            loaded = worker.add_external_corpus("ext", _corpus_for(rounds.rank))
            worker.commit_corpus_load("ext", loaded)
        tails = [r.origin_input_ids_unpadded[-4:] + r.output_ids for r in reqs]
        alone = worker.ngram_corpus.batch_get([r.rid for r in reqs], tails, [len(t) for t in tails])
        req_drafts, mask = worker._prepare_draft_tokens(batch)
        assert isinstance(req_drafts, np.ndarray) and isinstance(mask, np.ndarray)
        return {"draft_tokens": req_drafts.tolist(), "tree_mask": mask.tolist(),
                "engine": [str(req_drafts.dtype), list(req_drafts.shape), str(mask.dtype), list(mask.shape)],
                "own": {"draft_tokens": alone[0].tolist(), "tree_mask": alone[1].tolist(),
                        "engine": [str(alone[0].dtype), list(alone[0].shape), str(alone[1].dtype),
                                   list(alone[1].shape)]}}

    return rounds.done(out, rounds.run(3, one_round))


WORKERS = {"ngram_draft": draft}
