"""The tree constraint (transformer_jax/parsing/constraint.py): every piece sequence it lets end is one tree over
exactly the input's words, every gold linearisation passes it, and illegal steps are masked — with the parsing
demo's kind of SentencePiece vocabulary and with a hand-made one whose symbols take one or several pieces."""

import functools
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.data import synthetic
from transformer_jax.data.ptb import SyntheticParseSource
from transformer_jax.data.tokenizer import EOS_ID, Tokenizer
from transformer_jax.decode.beam_search import Constraint, beam_search, greedy_search
from transformer_jax.parsing.constraint import WORD_BOUNDARY, TreeConstraint
from transformer_jax.parsing.trees import TreeError, delinearize, linearize, tree_symbols


class PieceList:
    """A hand-made tokenizer: greedy longest match over a fixed piece list (ids 0-2 are pad, EOS, unk)."""

    def __init__(self, pieces, boundary=WORD_BOUNDARY):
        self.pieces, self.boundary = ["<pad>", "</s>", "<unk>", *pieces], boundary

    @property
    def vocab_size(self):
        return len(self.pieces)

    def id_to_piece(self, token_id):
        return self.pieces[token_id]

    def encode(self, text):
        rest, ids = self.boundary + text.replace(" ", self.boundary), []
        while rest:
            match = max((p for p in self.pieces[3:] if rest.startswith(p)), key=len)
            ids.append(self.pieces.index(match))
            rest = rest[len(match):]
        return ids + [EOS_ID]

    def decode(self, ids):
        ids = list(ids)
        ids = ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids
        return "".join(self.pieces[i] for i in ids if i > 2).replace(WORD_BOUNDARY, " ").strip()


# (NP is one piece, (S and (VP two, (SBAR three and an extension of (S; XX is two pieces; "(" and ")" without the
# word boundary, "▁" alone and word pieces are never part of a tree.
HAND = PieceList(["▁(", "▁)", "▁(NP", "▁)NP", "S", "BAR", "VP", "▁X", "X", "(", ")", "▁", "▁w", "ord", "NP"])
HAND_LABELS = ["NP", "S", "SBAR", "VP"]


@pytest.fixture(scope="module")
def parse_data():
    return synthetic.generate_parse_splits(seed=0, train_size=1500, dev_size=10, test_size=200)


@pytest.fixture(scope="module")
def small_vocab(parse_data):
    """SentencePiece as the demo trains it, but small: (ADVP is ▁( AD VP, (WHADVP ▁( W H AD VP."""
    sample = [text for sentence, tree in parse_data["train"] for text in (sentence, linearize(tree))]
    return Tokenizer.train(sample, vocab_size=330, num_threads=1)


@pytest.fixture(scope="module")
def merged_vocab(parse_data):
    """As the parsing demo trains it (config.data.tokenizer_split_by_script=False): (NP is one piece, ▁(NP."""
    sample = [text for sentence, tree in parse_data["train"] for text in (sentence, linearize(tree))]
    tokenizer = Tokenizer.train(sample, vocab_size=600, num_threads=1, split_by_unicode_script=False)
    assert len(tokenizer.encode("(NP")) == 2  # the piece and EOS
    return tokenizer


def ids_of(tokenizer, text):
    return np.asarray(tokenizer.encode(text), np.int32)


@functools.cache
def jitted(constraint):
    return jax.jit(constraint.allowed), jax.jit(constraint.advance)


def walk(constraint, state, budgets, choose, max_steps):
    """Runs hypotheses through the automaton; ``choose(step, mask) -> tokens``; returns tokens [N, T]."""
    allowed, advance = jitted(constraint)
    done = np.zeros(state.node.shape[0], bool)
    out = []
    for t in range(max_steps):
        mask = np.asarray(allowed(state, jnp.asarray(budgets - t - 1, jnp.int32)))
        assert mask[~done].any(axis=1).all(), f"step {t}: a hypothesis has no way to go on"
        tokens = np.where(done, 0, choose(t, mask))
        assert mask[~done, tokens[~done]].all(), f"step {t}: a chosen piece is not allowed"
        out.append(tokens)
        state = advance(state, jnp.asarray(tokens, jnp.int32))
        done |= tokens == EOS_ID
        if done.all():
            break
    return np.stack(out, 1), done


def random_walks(constraint, n_words, budgets, seed):
    rng = np.random.default_rng(seed)

    def choose(_, mask):  # uniform over the allowed pieces
        return np.array([rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in mask])

    return walk(constraint, constraint.init(jnp.asarray(n_words)), np.asarray(budgets), choose, int(max(budgets)))


def assert_trees(tokenizer, tokens, n_words, budgets):
    for row, n, budget in zip(tokens, n_words, budgets):
        assert EOS_ID in row.tolist()
        assert row.tolist().index(EOS_ID) + 1 <= budget
        words = [f"w{i}" for i in range(n)]
        tree = delinearize(tokenizer.decode(row.tolist()), words)  # raises unless one tree over the words
        assert tree.leaves() == words


@pytest.mark.parametrize("max_depth", [3, 64])
def test_random_walks_end_as_trees_over_the_words_hand_vocabulary(max_depth):
    constraint = TreeConstraint(HAND, HAND_LABELS, eos_id=EOS_ID, max_depth=max_depth)
    rng = np.random.default_rng(max_depth)
    n_words = rng.integers(1, 9, 96)
    budgets = np.asarray(constraint.min_length(n_words)) + rng.integers(0, 30, 96)
    tokens, done = random_walks(constraint, n_words, budgets, seed=1)
    assert done.all()
    assert_trees(HAND, tokens, n_words, budgets)
    texts = [HAND.decode(row.tolist()) for row in tokens]
    assert any("(SBAR" in t for t in texts) and any("(S " in t for t in texts)  # the prefix labels both occur
    if max_depth == 3:  # no deeper nesting than the stack
        assert all(max(np.cumsum([(w[0] == "(") - (w[0] == ")") for w in t.split()])) <= 3 for t in texts)


def test_random_walks_end_as_trees_over_the_words_sentencepiece(small_vocab, parse_data):
    labels, leaves = tree_symbols(linearize(tree) for _, tree in parse_data["train"])
    constraint = TreeConstraint(small_vocab, labels, leaves, eos_id=EOS_ID)
    spelled = {label: [small_vocab.id_to_piece(i) for i in small_vocab.encode(f"({label}")[:-1]] for label in labels}
    assert max(map(len, spelled.values())) > 2, spelled  # the small vocabulary splits some labels
    rng = np.random.default_rng(0)
    n_words = rng.integers(1, 15, 64)
    budgets = np.asarray(constraint.min_length(n_words)) + rng.integers(0, 60, 64)
    tokens, done = random_walks(constraint, n_words, budgets, seed=2)
    assert done.all()
    assert_trees(small_vocab, tokens, n_words, budgets)


def test_the_shortest_budget_leaves_only_the_shortest_trees():
    constraint = TreeConstraint(HAND, HAND_LABELS, eos_id=EOS_ID)
    n_words = np.array([1, 2, 5])
    budgets = np.asarray(constraint.min_length(n_words))
    tokens, done = random_walks(constraint, n_words, budgets, seed=3)
    assert done.all()
    assert [HAND.decode(r.tolist()) for r in tokens] == [
        f"(NP {' '.join(['XX'] * n)} )NP" for n in n_words]  # (NP and )NP are the one-piece brackets


@pytest.mark.parametrize("vocabulary", ["hand", "sentencepiece", "sentencepiece_merged"])
def test_every_gold_linearisation_is_allowed_throughout(vocabulary, small_vocab, merged_vocab, parse_data):
    tokenizer = {"hand": HAND, "sentencepiece": small_vocab, "sentencepiece_merged": merged_vocab}[vocabulary]
    trees = [tree for _, tree in parse_data["test"]]
    if vocabulary == "hand":  # the hand vocabulary has four labels: rename the others
        rename = {"NP": "NP", "S": "S", "SBAR": "SBAR"}
        targets = [" ".join(t if t[0] not in "()" or t[1:] in rename else t[0] + "VP" for t in linearize(tree).split())
                   for tree in trees]
        labels = HAND_LABELS
    else:
        targets = [linearize(tree) for tree in trees]
        labels, _ = tree_symbols(linearize(tree) for _, tree in parse_data["train"])
    constraint = TreeConstraint(tokenizer, labels, eos_id=EOS_ID)
    gold = [ids_of(tokenizer, target) for target in targets]
    length = max(map(len, gold))
    padded = np.stack([np.pad(g, (0, length - len(g))) for g in gold])
    n_words = np.array([len(tree.leaves()) for tree in trees])
    budgets = np.array([len(g) for g in gold])  # the tightest limit: the gold length itself
    tokens, done = walk(constraint, constraint.init(jnp.asarray(n_words)), budgets, lambda t, _: padded[:, t], length)
    assert done.all()
    np.testing.assert_array_equal(tokens, padded[:, : tokens.shape[1]])


def test_illegal_steps_are_masked():
    constraint = TreeConstraint(HAND, HAND_LABELS, eos_id=EOS_ID)
    allowed, advance = jitted(constraint)
    piece = {p: i for i, p in enumerate(HAND.pieces)}

    def options(prefix, n_words, budget=100):
        """The pieces allowed after ``prefix`` (piece strings) for a sentence of ``n_words`` words."""
        state = constraint.init(jnp.array([n_words]))
        for p in prefix:
            state = advance(state, jnp.array([piece[p]]))
        mask = np.asarray(allowed(state, jnp.array([budget - len(prefix) - 1])))[0]
        return {HAND.pieces[i] for i in np.flatnonzero(mask)}

    assert options([], 2) == {"▁(", "▁(NP"}  # the root is a constituent: no leaf, closing or EOS first
    assert options(["▁("], 2) == {"S", "VP"}  # a label from the list (SBAR goes through S)
    assert options(["▁(", "S"], 2) == {"BAR", "▁(", "▁(NP", "▁X"}  # (SBAR, or (S then a child; not closed empty
    assert options(["▁(", "S", "▁X"], 2) == {"X"}  # XX is two pieces: no other piece finishes it
    assert options(["▁(", "S", "▁X", "X"], 1) == {"▁)"}  # every word placed: only the closing of (S
    assert options(["▁(", "S", "▁X", "X"], 2) == {"▁(", "▁(NP", "▁X"}  # a word left: the root cannot close yet
    assert options(["▁(", "S", "▁(NP", "▁X", "X"], 2) == {"▁(", "▁(NP", "▁X", "▁)NP"}  # inside (NP: only )NP
    assert options(["▁(", "S", "▁(", "VP", "▁X", "X", "▁)"], 2) == {"VP"}  # ")" repeats the innermost label
    assert options(["▁(", "S", "▁X", "X", "▁)", "S"], 1) == {"</s>"}  # one root, then the end
    # The length limit: after "(S" for one word, "XX )S </s>" takes 5 pieces, "(NP XX )NP )S </s>" 7 and
    # "BAR XX )SBAR </s>" 7; with fewer than 5 positions left nothing can end (every piece masked).
    assert options(["▁(", "S"], 1, budget=2 + 5) == {"▁X"}
    assert options(["▁(", "S"], 1, budget=2 + 7) == {"▁X", "▁(NP", "BAR"}
    assert options(["▁(", "S"], 1, budget=2 + 4) == set()


def test_a_piece_that_is_not_allowed_changes_nothing():
    constraint = TreeConstraint(HAND, HAND_LABELS, eos_id=EOS_ID)
    state = constraint.init(jnp.array([2]))
    after = constraint.advance(state, jnp.array([HAND.pieces.index("▁w")]))
    jax.tree.map(np.testing.assert_array_equal, after, state)


def test_words_are_counted_like_str_split(small_vocab, parse_data):
    constraint = TreeConstraint(small_vocab, ["S"], eos_id=EOS_ID)
    sentences = [s for s, _ in parse_data["test"][:50]] + ["Zürich ☃ x", "a", "a  b", "☃☃ ☃", "z .x , y"]
    ids = [small_vocab.encode(s) for s in sentences]
    inputs = np.stack([np.pad(i, (0, max(map(len, ids)) - len(i))) for i in ids])
    np.testing.assert_array_equal(constraint.count_words(jnp.asarray(inputs)), [len(s.split()) for s in sentences])


def test_tree_symbols_and_bad_vocabularies():
    assert tree_symbols(["(S (NP XX )NP XX )S", "(FRAG XX )FRAG"]) == (["FRAG", "NP", "S"], ["XX"])
    assert tree_symbols(["(S (NP DT NN )NP . )S"], pos_tags=True) == (["NP", "S"], [".", "DT", "NN"])
    # The synthetic grammar's source gives its own label set without drawing the training pairs: the same set
    # its training trees use (given enough of them), with and without POS tags.
    for pos_tags in (False, True):
        data = SimpleNamespace(synthetic={"seed": 0, "train_size": 3000, "dev_size": 5, "test_size": 5},
                               pos_tags=pos_tags)
        source = SyntheticParseSource(data)
        assert source.tree_symbols() == tree_symbols((t for _, t in source.pairs("train")), pos_tags)
    with pytest.raises(ValueError, match="starts with"):  # symbols that do not start a word: no boundary
        TreeConstraint(PieceList(["(", ")", "S", "XX"], boundary=""), ["S"], eos_id=EOS_ID)


# -- the constraint in the search (config.decode.tree_constraint) ----------------------------------------------------

PRIME = 1009


def scripted_parser(tokenizer, trees, noise, bonus, seed=0):
    """A step function that prefers each sentence's gold linearisation (``bonus`` on its next piece) over random
    logits (``noise`` × a fixed random function of the prefix, EOS 10 lower: it rarely ends by chance); cache rows:
    prefix hash, step, sentence. A piece that beats the gold one replaces it (the gold goes on a step later)."""
    gold = [ids_of(tokenizer, linearize(tree)) for tree in trees]
    length = max(map(len, gold))
    table = jnp.asarray(np.stack([np.pad(g, (0, length + 64 - len(g)), constant_values=EOS_ID) for g in gold]))
    noise_table = np.random.default_rng(seed).normal(size=(PRIME, tokenizer.vocab_size)) * noise
    noise_table[:, EOS_ID] -= 10.0
    noise_table = jnp.asarray(noise_table, jnp.float32)

    def step(tokens, cache):
        h = jnp.where(cache["step"] == 0, cache["hash"], (cache["hash"] * 31 + tokens + 1) % PRIME)
        want = table[cache["sentence"], cache["step"]]  # [rows]: the gold piece
        boost = bonus + 10.0 * (want == EOS_ID)  # the gold EOS gets back what EOS lost
        logits = noise_table[h] + boost[:, None] * jax.nn.one_hot(want, tokenizer.vocab_size)
        return logits, {"hash": h, "step": cache["step"] + 1, "sentence": cache["sentence"]}

    def cache(copies):
        sentence = jnp.repeat(jnp.arange(len(trees), dtype=jnp.int32), copies)
        return {"hash": (sentence * 577 + 3) % PRIME, "step": jnp.zeros_like(sentence), "sentence": sentence}

    return step, cache, np.array([len(g) for g in gold])


def is_tree(tokenizer, ids, words):
    """Whether output ``ids`` decode to one tree over ``words``."""
    try:
        delinearize(tokenizer.decode(ids), words)
    except TreeError:
        return False
    return True


def in_constraint_language(tokenizer, ids, words, labels):
    """A tree over ``words`` as the constraint writes trees: known labels, each symbol closed by its own label (not
    a bare ")"), every symbol spelled as the tokenizer spells it (the constraint allows no other segmentation)."""
    ids = ids[: ids.index(EOS_ID) + 1] if EOS_ID in ids else ids
    text = tokenizer.decode(ids)
    symbols = {"XX", *(f"{b}{label}" for label in labels for b in "()")}
    return (is_tree(tokenizer, ids, words) and set(text.split()) <= symbols
            and ids == tokenizer.encode(" ".join(text.split())))


@pytest.mark.parametrize("beam, bonus", [(1, 5.5), (4, 7.0)])  # about half the free outputs are trees
def test_constrained_search_agrees_where_the_free_best_is_a_tree_and_is_always_one(beam, bonus, small_vocab,
                                                                                    parse_data):
    trees = [tree for _, tree in parse_data["test"][:48]]
    labels, leaves = tree_symbols(linearize(tree) for _, tree in parse_data["train"])
    constraint = TreeConstraint(small_vocab, labels, leaves, eos_id=EOS_ID)
    step, cache, gold_lengths = scripted_parser(small_vocab, trees, noise=1.0, bonus=bonus)
    batch, max_len = len(trees), int(gold_lengths.max()) + 12
    n_words = jnp.asarray([len(tree.leaves()) for tree in trees], jnp.int32)

    def search(constrained):
        guard = Constraint(constraint.init(jnp.repeat(n_words, beam)), constraint.allowed, constraint.advance)
        return beam_search(step, cache(beam), batch_size=batch, beam_size=beam, max_decode_len=max_len,
                           max_lengths=jnp.asarray(gold_lengths + 12), length_penalty=0.3, eos_id=EOS_ID,
                           num_best=1, constraint=guard if constrained else None)

    free, kept = jax.jit(lambda: search(False))(), jax.jit(lambda: search(True))()
    words = [tree.leaves() for tree in trees]
    free_trees = [in_constraint_language(small_vocab, free.sequences[b, 0].tolist(), words[b], labels)
                  for b in range(batch)]
    assert 12 <= sum(free_trees) <= batch - 12, sum(free_trees)  # both cases occur
    for b in range(batch):
        assert in_constraint_language(small_vocab, kept.sequences[b, 0].tolist(), words[b], labels)
        if free_trees[b]:  # the mask removed only other hypotheses: the same best, with the model's own score
            np.testing.assert_array_equal(kept.sequences[b], free.sequences[b])
            np.testing.assert_array_equal(kept.scores[b], free.scores[b])


def test_greedy_search_under_the_constraint_gives_trees(small_vocab, parse_data):
    trees = [tree for _, tree in parse_data["test"][:32]]
    labels, leaves = tree_symbols(linearize(tree) for _, tree in parse_data["train"])
    constraint = TreeConstraint(small_vocab, labels, leaves, eos_id=EOS_ID)
    step, cache, gold_lengths = scripted_parser(small_vocab, trees, noise=3.0, bonus=1.0)
    n_words = jnp.asarray([len(tree.leaves()) for tree in trees], jnp.int32)
    guard = Constraint(constraint.init(n_words), constraint.allowed, constraint.advance)
    sequences, _ = greedy_search(step, cache(1), batch_size=len(trees), max_decode_len=int(gold_lengths.max()) + 8,
                                 max_lengths=jnp.asarray(gold_lengths + 8), eos_id=EOS_ID, constraint=guard)
    assert all(is_tree(small_vocab, sequences[b].tolist(), tree.leaves()) for b, tree in enumerate(trees))


def test_translator_decodes_trees_under_config_decode_tree_constraint(small_vocab, parse_data):
    """From the config to the search: a random Transformer's outputs are trees over the words with the constraint
    (labels from the run's training trees, word counts from the encoded inputs), and mostly not without it."""
    from flax import nnx

    from transformer_jax.configs import base, parsing, parsing_demo
    from transformer_jax.decode.translate import Translator
    from transformer_jax.model.transformer import Transformer

    assert parsing.get_config().decode.tree_constraint and parsing_demo.get_config().decode.tree_constraint
    assert not base.get_config().decode.tree_constraint
    config = parsing_demo.get_config()
    config.data.synthetic.update(train_size=1500, dev_size=10, test_size=200)  # the fixture's trees
    config.model.update(vocab_size=small_vocab.vocab_size, d_model=32, d_ff=64, num_heads=2, d_k=16, d_v=16,
                        num_encoder_layers=1, num_decoder_layers=1, max_len=80)
    config.decode.update(beam_size=2, batch_size=8, max_length_offset=40)
    graphdef, params = nnx.split(Transformer(config.model, rngs=nnx.Rngs(0)))
    sentences = [sentence for sentence, _ in parse_data["test"] if len(sentence.split()) <= 12][:8]
    outputs = {}
    for on in (True, False):
        config.decode.tree_constraint = on
        outputs[on] = Translator(config, graphdef, params, small_vocab).translate(sentences)
    assert all(is_tree(small_vocab, small_vocab.encode(out), s.split()) for out, s in zip(outputs[True], sentences))
    assert not any(is_tree(small_vocab, small_vocab.encode(out), s.split()) for out, s in zip(outputs[False], sentences))
