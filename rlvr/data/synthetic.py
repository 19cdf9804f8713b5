"""A procedurally generated family of stdin/stdout tasks that a tiny model can learn on CPU in minutes.

A random tiny model solves no real benchmark problem, so the smoke profile trains on this family instead: a few
*templates* (``add``, ``sub``, ``mul``, ``mod``, ``repeat``, ``count``, ``sum_plus``), each instantiated with an
integer *constant* ``c`` that appears in the statement ("Read an integer n and print n + 7.") and in the reference
solution (``print(int(input()) + 7)``), plus one feedback template (``judge_number``, below). The model therefore
has to read the statement (template words + the constant) to answer; a solution is one or two lines (a few dozen
tokens).

Held-out (what ``dev`` measures, and why it is honest): for every template a seeded share (``dev_fraction``) of the
constants is held out, so ``dev`` is the set of *unseen (template, constant) combinations*; the rest are ``train``.
Every dev constant still occurs in ``train`` under other templates, and every dev template occurs in ``train`` with
other constants, but the exact statement and the exact program of a dev instance are never trained on. Solving one
therefore needs composition: the template's program shape plus *copying the constant from the statement* into the
code. The default range ``2..9`` keeps every constant one digit, i.e. one token under any byte-level BPE (the GPT-2
pre-tokenizer splits digit runs from letters), so copying is a single-token copy a 2-layer model learns in about a
minute of CPU training; wider ranges (multi-token constants) are allowed and are much harder for a tiny model.
Measured (hidden 128, 2 layers, 80–150 SFT epochs, see README "Smoke profile results"): dev accepted@1 goes from
0 (random init) to 0.5–0.9, so learning on held-out instances is visible.

The feedback template ``judge_number`` ("Print the number the judge expects.", reference ``print(7)``) is the
smoke profile's test of multi-turn repair: its statement is the *same* for every constant, so a first answer, which
sees only the statement, is right for at most one instance (greedy decoding answers them all alike), while the judge's
feedback on the visible test shows the expected output, i.e. the constant. It is the smallest task where feedback is
both necessary and sufficient: the fix is a copy from the feedback. Its dev instances are unseen *targets* of a
seen statement. With the shared range (8 one-digit constants, 6 to train on) the smoke profile's 2-layer policy does
*not* learn that copy: it learns to repeat digits it was trained to output. With its own wide range
(:class:`FeedbackConstants`: hundreds of two- and three-digit constants) *and* feedback that shows the expected
output last, nearest the answer, the copy generalises to unseen numbers: dev recovery 3/4 in the repair stage, and
1.000 dev copy accuracy in ``bench/repair_probe`` (with the policy's own output after the expected one: 0/4 and
0.014; README, Smoke profile results). Its other
instances are in split ``repair`` (:data:`REPAIR_SPLIT`), not ``train``: a first-turn prompt that does not determine
the answer has nothing for single-turn training (SFT, DPO, GRPO on ``synthetic/train``) to learn except a guess; the
repair stage trains on them (``repair.train.train_sets``), and they carry ``meta["needs_feedback"]`` so that repair
training gives them no first-turn prompt either.

Every instance is a :class:`rlvr.data.schema.Problem` (``source="synthetic"``, id ``synthetic/<template>-<c>``)
with ``n_tests`` stdio tests whose inputs are drawn from ``random.Random(f"{seed}/{id}")`` and whose outputs are
computed by the template's Python function (never by running code), plus the reference solution in
``solutions`` and a near miss (constant off by one) in ``incorrect_solutions``. Deterministic given the
parameters (checked by a test).

Use :func:`generate` (or :func:`generate_from_params`), and :func:`corpus_texts` to add the family's texts to a
tokenizer's training corpus (``rlvr.model.build_tiny_model``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pydantic import Field, model_validator

from rlvr.config import Section
from rlvr.data.schema import Problem, StdioTest

__all__ = [
    "REPAIR_SPLIT",
    "SOURCE",
    "TEMPLATES",
    "FeedbackConstants",
    "SyntheticParams",
    "Template",
    "completion_for",
    "corpus_texts",
    "generate",
    "generate_from_params",
]

SOURCE = "synthetic"
#: Split of the feedback templates' training instances: trained only by multi-turn repair (module doc).
REPAIR_SPLIT = "repair"


@dataclass(frozen=True)
class Template:
    """One task template.

    ``statement``/``solution`` are ``str.format`` patterns over ``c`` (the constant); ``make_input(rng)`` draws one
    stdin text (without the trailing newline); ``answer(stdin, c)`` computes the expected stdout (without newline).
    ``feedback``: a feedback template (module doc): its non-dev instances get split :data:`REPAIR_SPLIT` and
    ``meta["needs_feedback"] = True``."""

    name: str
    statement: str
    solution: str
    make_input: Callable[[random.Random], str]
    answer: Callable[[str, int], str]
    feedback: bool = False


def _int(rng: random.Random) -> str:
    return str(rng.randint(0, 99))


def _two(rng: random.Random) -> str:
    return f"{rng.randint(0, 99)} {rng.randint(0, 99)}"


_WORDS = ("cat", "dog", "sun", "tree", "blue", "code", "star", "fish", "rain", "milk", "box", "red")


def _word(rng: random.Random) -> str:
    return rng.choice(_WORDS)


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template("add", "Read an integer n and print n + {c}.", "print(int(input()) + {c})",
                 _int, lambda s, c: str(int(s) + c)),
        Template("sub", "Read an integer n and print n - {c}.", "print(int(input()) - {c})",
                 _int, lambda s, c: str(int(s) - c)),
        Template("mul", "Read an integer n and print n * {c}.", "print(int(input()) * {c})",
                 _int, lambda s, c: str(int(s) * c)),
        Template("mod", "Read an integer n and print n % {c}.", "print(int(input()) % {c})",
                 _int, lambda s, c: str(int(s) % c)),
        Template("repeat", "Read a word and print it {c} times, separated by spaces.",
                 "print(' '.join([input()] * {c}))", _word, lambda s, c: " ".join([s] * c)),
        Template("count", "Print the numbers from 1 to {c}, one per line.",
                 "for i in range(1, {c} + 1):\n    print(i)", lambda rng: "",
                 lambda s, c: "\n".join(str(i) for i in range(1, c + 1))),
        Template("sum_plus", "Read two integers a and b and print a + b + {c}.",
                 "a, b = map(int, input().split())\nprint(a + b + {c})",
                 _two, lambda s, c: str(sum(map(int, s.split())) + c)),
        # feedback template (module doc): the constant is not in the statement, only in the expected output
        Template("judge_number", "Print the number the judge expects.", "print({c})",
                 lambda rng: "", lambda s, c: str(c), feedback=True),
    )
}


class FeedbackConstants(Section):
    """Constants of the feedback templates (``synthetic.feedback`` in ``params.yaml``; module doc).

    ``instances`` = 0: the feedback templates use the family's shared range and ``dev_fraction`` like every other
    template. ``instances`` > 0: each feedback template gets that many constants, drawn without replacement from
    ``[min_constant, max_constant]`` by ``random.Random(f"{seed}/{template}/constants")``, of which ``dev`` (drawn by
    ``random.Random(f"{seed}/{template}")``) are held out as ``dev`` and the rest are split :data:`REPAIR_SPLIT`. A
    wide range with many instances is what makes the copy from the feedback learnable by a tiny model (given feedback
    that shows the expected output last): the answer is a multi-digit number copied digit by digit, every digit
    occurs at every position in training, and a dev target is an unseen *number* made of seen digits (README, Smoke
    profile results)."""

    instances: int = Field(0, ge=0)
    min_constant: int = Field(0, ge=0)
    max_constant: int = Field(999, ge=0)
    dev: int = Field(2, ge=1)

    @model_validator(mode="after")
    def _check(self) -> FeedbackConstants:
        size = self.max_constant - self.min_constant + 1
        if self.instances and self.instances > size:
            raise ValueError(f"feedback.instances={self.instances} > {size} constants in "
                             f"[{self.min_constant}, {self.max_constant}]")
        if self.instances and self.dev >= self.instances:
            raise ValueError(f"feedback.dev={self.dev} must be < feedback.instances={self.instances}")
        return self


class SyntheticParams(Section):
    """Parameters of the family (a ``params.yaml`` section, e.g. ``synthetic``).

    Fields: ``seed`` (test inputs and the dev hold-out), ``templates`` (names from :data:`TEMPLATES`; empty = all),
    ``min_constant``/``max_constant`` (inclusive range of ``c``; ≥ 2 so ``mod`` is meaningful), ``dev_fraction``
    (share of each template's constants held out as ``dev``), ``n_tests`` (stdio tests per instance), ``feedback``
    (the feedback templates' own constants: :class:`FeedbackConstants`)."""

    seed: int = 0
    templates: list[str] = Field(default_factory=list)
    min_constant: int = Field(2, ge=2)
    max_constant: int = Field(9, ge=2)
    dev_fraction: float = Field(0.25, gt=0, lt=1)
    n_tests: int = Field(5, ge=1)
    feedback: FeedbackConstants = Field(default_factory=FeedbackConstants)

    @model_validator(mode="after")
    def _check(self) -> SyntheticParams:
        unknown = [t for t in self.templates if t not in TEMPLATES]
        if unknown:
            raise ValueError(f"templates: unknown {unknown}; known {sorted(TEMPLATES)}")
        if self.max_constant < self.min_constant:
            raise ValueError(f"max_constant={self.max_constant} < min_constant={self.min_constant}")
        return self


def completion_for(solution: str) -> str:
    """The assistant answer for ``solution`` in the format the reward layer extracts: one fenced python block.

    >>> completion_for("print(1)")
    '```python\\nprint(1)\\n```'
    """
    return f"```python\n{solution.rstrip()}\n```"


def _instance(t: Template, c: int, split: str, seed: int, n_tests: int) -> Problem:
    pid = f"{SOURCE}/{t.name}-{c}"
    rng = random.Random(f"{seed}/{pid}")
    tests = []
    for _ in range(n_tests):
        stdin = t.make_input(rng)
        tests.append(StdioTest(stdin=stdin + "\n" if stdin else "", stdout=t.answer(stdin, c) + "\n"))
    return Problem(
        id=pid,
        source=SOURCE,
        split=split,
        statement=t.statement.format(c=c),
        tests=tests,
        time_limit_s=2.0,
        memory_limit_mb=256,
        solutions=[t.solution.format(c=c)],
        # A near miss (the constant off by one): the dataset's known-wrong solution, used for DPO dataset pairs.
        incorrect_solutions=[t.solution.format(c=c + 1)],
        meta={"template": t.name, "constant": c, **({"needs_feedback": True} if t.feedback else {})},
    )


def generate(
    seed: int = 0,
    templates: Sequence[str] | None = None,
    min_constant: int = 2,
    max_constant: int = 9,
    dev_fraction: float = 0.25,
    n_tests: int = 5,
    feedback: FeedbackConstants | None = None,
) -> list[Problem]:
    """All instances of the family: one :class:`Problem` per (template, constant), ``split`` ``train``, ``dev`` or
    (feedback templates) :data:`REPAIR_SPLIT`.

    Order: templates in :data:`TEMPLATES` order, constants ascending. The dev constants of each template are
    ``round(dev_fraction * n_constants)`` (at least 1) drawn by ``random.Random(f"{seed}/{template}")``; a feedback
    template's constants and dev count come from ``feedback`` when its ``instances`` > 0 (:class:`FeedbackConstants`).
    Raises ``ValueError`` for an unknown template name or an empty constant range."""
    names = list(templates) if templates else list(TEMPLATES)
    unknown = [n for n in names if n not in TEMPLATES]
    if unknown:
        raise ValueError(f"synthetic: unknown templates {unknown}; known {sorted(TEMPLATES)}")
    constants = list(range(min_constant, max_constant + 1))
    if not constants:
        raise ValueError(f"synthetic: empty constant range [{min_constant}, {max_constant}]")
    n_dev = max(1, round(dev_fraction * len(constants)))
    out: list[Problem] = []
    for name in names:
        t = TEMPLATES[name]
        mine, n_mine = constants, n_dev
        if t.feedback and feedback is not None and feedback.instances:
            pool = range(feedback.min_constant, feedback.max_constant + 1)
            mine = sorted(random.Random(f"{seed}/{name}/constants").sample(pool, feedback.instances))
            n_mine = feedback.dev
        dev = set(random.Random(f"{seed}/{name}").sample(mine, n_mine))
        for c in mine:
            split = "dev" if c in dev else (REPAIR_SPLIT if t.feedback else "train")
            out.append(_instance(t, c, split, seed, n_tests))
    return out


def generate_from_params(params: SyntheticParams) -> list[Problem]:
    """:func:`generate` with the fields of ``params``."""
    return generate(
        seed=params.seed,
        templates=params.templates or None,
        min_constant=params.min_constant,
        max_constant=params.max_constant,
        dev_fraction=params.dev_fraction,
        n_tests=params.n_tests,
        feedback=params.feedback,
    )


def corpus_texts(problems: Iterable[Problem] | None = None) -> list[str]:
    """Texts of the family for tokenizer training: each rendered user prompt (:func:`rlvr.data.prompts.build_prompt`)
    and each reference answer (:func:`completion_for`). ``None`` = the default family (:func:`generate`)."""
    from rlvr.data.prompts import build_prompt

    ps = list(problems) if problems is not None else generate()
    texts: list[str] = []
    for p in ps:
        texts.append(build_prompt(p))
        texts.extend(completion_for(s) for s in p.solutions)
    return texts
