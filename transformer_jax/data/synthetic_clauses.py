"""The synthetic grammar's clauses: one derivation rendered in English and German word order.

A :class:`Clause` holds its parts already translated; only their order differs between the languages. German is
verb-second in main clauses ("Heute sieht der Mann den Hund.") and verb-final in subordinate clauses, with the
participle or modal infinitive at the end of its clause ("..., weil der Mann heute den kleinen Hund mit dem Ball
gesehen hat."); complement and adjunct clauses follow the verbs, after a comma. English keeps subject-verb-object
order, with adverbs and PPs after their own clause's material and before its subordinate clauses, so each English
sentence has exactly one German translation and translating means moving words across 10+ tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from transformer_jax.data.synthetic_lexicon import AUXILIARIES, MODALS, Adverb, Verb
from transformer_jax.data.synthetic_trees import COMMA, adverb_tree, english_pp, preterminal, sentence_tree
from transformer_jax.parsing.trees import Tree


@dataclasses.dataclass
class Clause:
    """One clause, its parts already rendered as (English, German) pairs; word order is decided when rendering.

    tense: "pres", "perf", or a modal ("can", "must", "may", "want"). objs: (English, German) in order (dative before
    accusative). front (main clauses only): "adv" or "pp" (the first PP) opens the clause instead of the subject.
    comp: the "that"/"dass" complement of a verb of saying; adjuncts: (English, German, clause) trailing clauses.
    The English halves of subj, objs, pred and pps are `Tree`s (from noun_phrase, prepositional_phrase, or written
    by hand: (NP (PRP I))), so the clause has a PTB tree too; their leaves are the English words.
    """

    subj: tuple[Tree, str]
    person: str
    verb: Verb
    tense: str = "pres"
    objs: list[tuple[Tree, str]] = dataclasses.field(default_factory=list)
    pred: tuple[Tree, str] | None = None
    adv: Adverb | None = None
    pps: list[tuple[Tree, str]] = dataclasses.field(default_factory=list)
    front: str | None = None
    comp: Clause | None = None
    adjuncts: list[tuple[str, str, Clause]] = dataclasses.field(default_factory=list)


def english_clause(c: Clause) -> Tree:
    """English S: [fronted] subject verb-group objects predicate PPs adverb [that ...] [because ...].

    Auxiliaries and modals head nested VPs; everything after the verb is a child of the lowest VP.
    """
    front, pps = [], c.pps
    if c.front == "adv":
        front.append(adverb_tree(c.adv.en))
    elif c.front == "pp":
        front.append(pps[0][0])
        pps = pps[1:]
    v, p, t = c.verb, c.person, c.tense
    finite = "VBZ" if p == "3s" else "VBP"
    form, tag = (v.en_present(p), finite) if t == "pres" else (v.en["pp"], "VBN") if t == "perf" else (
        v.en["base"], "VB")
    head, _, particle = form.partition(" ")  # "look for", "wave to": the particle heads a PP over the object
    objs = [o[0] for o in c.objs]
    if particle:
        objs[0] = english_pp(particle, objs[0])
    vp = Tree("VP", (preterminal(tag, head), *objs, *([c.pred[0]] if c.pred else []), *(pp[0] for pp in pps),
                     *([adverb_tree(c.adv.en)] if c.adv and c.front != "adv" else []),
                     *([Tree("SBAR", (preterminal("IN", "that"), english_clause(c.comp)))] if c.comp else []),
                     *(_sbar(en, sub) for en, _, sub in c.adjuncts)))
    if t == "perf":
        vp = Tree("VP", (preterminal(finite, "has" if p == "3s" else "have"), vp))
    elif t == "want":  # (VP (VBZ wants) (S (VP (TO to) (VP (VB see) ...)))), the empty subject dropped
        to_vp = Tree("S", (Tree("VP", (preterminal("TO", "to"), vp)),))
        vp = Tree("VP", (preterminal(finite, "wants" if p == "3s" else "want"), to_vp))
    elif t != "pres":
        vp = Tree("VP", (preterminal("MD", MODALS[t][0]), vp))
    return Tree("S", (*front, c.subj[0], vp))


def _sbar(conj: str, sub: Clause) -> Tree:
    """(SBAR (IN because) (S ...)); "when" is a wh-adverb: (SBAR (WHADVP (WRB when)) (S ...))."""
    head = Tree("WHADVP", (preterminal("WRB", conj),)) if conj == "when" else preterminal("IN", conj)
    return Tree("SBAR", (head, english_clause(sub)))


def _de_verbs(c: Clause) -> tuple[str, list[str]]:
    """(finite verb, clause-final non-finite verbs)."""
    if c.tense == "pres":
        return c.verb.de_present[c.person], []
    if c.tense == "perf":
        return AUXILIARIES[c.verb.aux][c.person], [c.verb.de_pp]
    return MODALS[c.tense][1][c.person], [c.verb.de_inf]


def _de_middle(c: Clause, pps: Sequence[tuple[str, str]]) -> list[str]:
    """German middle field: time adverb, objects, manner adverb, predicate adjective, PPs."""
    out = [c.adv.de] if c.adv and c.adv.frontable and c.front != "adv" else []
    out += [o[1] for o in c.objs]
    if c.adv and not c.adv.frontable:
        out.append(c.adv.de)
    if c.pred:
        out.append(c.pred[1])
    return out + [pp[1] for pp in pps]


def _de_extraposed(c: Clause) -> list[str]:
    """Complement and adjunct clauses follow the verbs of their clause, each after a comma."""
    out = [",", "dass", *_de_sub(c.comp)] if c.comp else []
    for _, de, sub in c.adjuncts:
        out += [",", de, *_de_sub(sub)]
    return out


def _de_sub(c: Clause) -> list[str]:
    """Subordinate clause (after its conjunction): verb last, after the participle/infinitive."""
    fin, rest = _de_verbs(c)
    return [c.subj[1], *_de_middle(c, c.pps), *rest, fin, *_de_extraposed(c)]


def german_main(c: Clause, vorfeld: list[str] | None = None) -> list[str]:
    """Main clause: one constituent, the finite verb second, the middle field, the non-finite verbs last."""
    fin, rest = _de_verbs(c)
    pps = c.pps
    if vorfeld is None and c.front == "adv":
        vorfeld = [c.adv.de]
    elif vorfeld is None and c.front == "pp":
        vorfeld, pps = [pps[0][1]], pps[1:]
    head = [c.subj[1], fin] if vorfeld is None else [*vorfeld, fin, c.subj[1]]
    return [*head, *_de_middle(c, pps), *rest, *_de_extraposed(c)]


def sentence_text(tokens: Sequence[str]) -> str:
    """The written sentence: tokens joined, no space before a comma, capitalised, a final full stop."""
    s = " ".join(tokens).replace(" ,", ",") + "."
    return s[0].upper() + s[1:]


def main_clause(clause: Clause, fronted: tuple[str, str, Clause] | None = None) -> tuple[Tree, list[str]]:
    """(English S tree, German tokens) of a main clause, optionally opened by a (conj_en, conj_de, clause)."""
    if fronted is None:
        return english_clause(clause), german_main(clause)
    en_conj, de_conj, sub = fronted
    en = Tree("S", (_sbar(en_conj, sub), COMMA, *english_clause(clause).children))
    return en, german_main(clause, [de_conj, *_de_sub(sub), ","])


def render(clause: Clause, fronted: tuple[str, str, Clause] | None = None) -> tuple[str, str]:
    """A main clause as an (English, German) sentence, optionally opened by a (conj_en, conj_de, clause)."""
    en, de = main_clause(clause, fronted)
    return sentence_text(en.leaves()), sentence_text(de)


def english_tree(clause: Clause, fronted: tuple[str, str, Clause] | None = None) -> Tree:
    """The PTB tree of `render(clause, fronted)[0]`; its words are that sentence tokenised ("... the park .")."""
    return sentence_tree(main_clause(clause, fronted)[0])
