"""How a flag specplan writes is spelled on a release whose parser lacks today's spelling.

Decided from the release's own flag table (flags/), never from its number: a release whose
parser has no `--attn-dp-size` (SGLang before it was added) spells DP-attention the older way,
`--dp-size N --enable-dp-attention` (which the newer releases still accept and resolve to
`--attn-dp-size N`). A flag with no spelling on the release is an Unspellable naming it.
"""

from __future__ import annotations

from specplan.engines.flag_table import FlagTable

Arg = tuple[str, "str | None", str]  # (flag, value, comment), as export writes it


class Unspellable(ValueError):
    """A flag specplan writes that the release's parser does not accept."""


def _attn_dp(value: str | None, comment: str) -> list[Arg]:
    return [("--dp-size", value, comment), ("--enable-dp-attention", None,
                                            "DP-attention, this release's spelling")]


# today's flag -> (the flag the older spelling needs, how to write it)
OLDER = {"--attn-dp-size": ("--enable-dp-attention", _attn_dp)}


def respell(args: list[Arg], table: FlagTable) -> list[Arg]:
    """`args` as `table`'s release spells them; Unspellable for a flag it has no way to say."""
    out: list[Arg] = []
    options = table.options
    for flag, value, comment in args:
        if flag in options:
            out.append((flag, value, comment))
        elif flag in OLDER and OLDER[flag][0] in options:
            out += OLDER[flag][1](value, comment)
        else:
            raise Unspellable(f"{flag} is not a flag of this release's parser")
    return out
