"""Tests for reading the Penn Treebank WSJ from an LDC-style folder and from tree files (§6.3), offline."""

import gzip
import json
from types import SimpleNamespace

import pytest

from transformer_jax.data.ptb import PtbSource, SyntheticParseSource, TreesSource, ptb_split_trees, split_files
from transformer_jax.data.sources import DataError
from transformer_jax.data.synthetic import generate_parse_splits
from transformer_jax.parsing.trees import normalize

# Each .mrg file holds these trees, with the section and file numbers as the CD words so that the test can tell
# which file every pair came from.
MRG = """\
( (S
    (NP-SBJ (NNP Mr.) (NNP Vinken) )
    (VP (VBZ is)
      (NP-PRD (NN chairman) (CD {section}) ))
    (. .) ))
( (S
    (NP-SBJ-1 (PRP It) )
    (VP (VBD was)
      (VP (VBN reported)
        (NP (-NONE- *-1) )
        (PP-TMP (IN in) (NP (CD {file}) ))))
    (. .) ))
"""
PAIRS = [
    ("Mr. Vinken is chairman {section} .", "(S (NP XX XX )NP (VP XX (NP XX XX )NP )VP XX )S"),
    ("It was reported in {file} .", "(S (NP XX )NP (VP XX (VP XX (PP XX (NP XX )NP )PP )VP )VP XX )S"),
]
FILES_PER_SECTION = 2


@pytest.fixture
def treebank(tmp_path):
    """An LDC layout treebank_3/parsed/mrg/wsj/00 … 24, two files of two trees per section."""
    mrg = tmp_path / "treebank_3" / "parsed" / "mrg"
    for section in range(25):
        folder = mrg / "wsj" / f"{section:02d}"
        folder.mkdir(parents=True)
        for f in range(FILES_PER_SECTION):
            suffix = ".MRG" if section == 22 and f == 1 else ".mrg"  # upper-case names occur on some copies
            path = folder / f"wsj_{section:02d}{f:02d}{suffix}"
            path.write_text(MRG.format(section=f"{section:02d}", file=f"{section:02d}{f:02d}"))
    (mrg / "wsj" / "README").write_text("not a section")
    return mrg


def ptb_split_pairs(root, split, pos_tags=False):
    return PtbSource(SimpleNamespace(data_dir=str(root), pos_tags=pos_tags)).pairs(split)


def tree_file_pairs(path):
    return TreesSource(SimpleNamespace(train_files=str(path))).pairs("train")


def expected(sections):
    return [
        (words.format(section=f"{s:02d}", file=f"{s:02d}{f:02d}"), target)
        for s in sections
        for f in range(FILES_PER_SECTION)
        for words, target in PAIRS
    ]


def test_standard_wsj_split(treebank):
    assert list(ptb_split_pairs(treebank, "dev")) == expected([22])
    assert list(ptb_split_pairs(treebank, "test")) == expected([23])
    train = list(ptb_split_pairs(treebank, "train"))
    assert len(train) == 20 * FILES_PER_SECTION * 2
    assert train == expected(range(2, 22))


def test_root_may_be_the_wsj_folder_itself_and_mrg_case_is_ignored(treebank):
    files = split_files(treebank / "wsj", "dev")
    assert [p.name for p in files] == ["wsj_2200.mrg", "wsj_2201.MRG"]
    assert files == split_files(treebank, "dev")


def test_pos_tags_and_raw_gold_trees(treebank):
    first = next(ptb_split_pairs(treebank, "test", pos_tags=True))
    assert first == ("Mr. Vinken is chairman 23 .", "(S (NP NNP NNP )NP (VP VBZ (NP NN CD )NP )VP . )S")
    gold = list(ptb_split_trees(treebank, "test"))
    assert len(gold) == 4 and gold[1].children[0].children[0].label == "NP-SBJ-1"  # as read, for EVALB


def test_missing_folder_and_sections(tmp_path, treebank):
    with pytest.raises(DataError, match=f"Penn Treebank folder not found: {tmp_path / 'nope'}"):
        list(ptb_split_pairs(tmp_path / "nope", "train"))
    with pytest.raises(DataError, match="no WSJ section folders"):
        list(ptb_split_pairs(tmp_path / "treebank_3", "train"))
    for section in ("05", "23"):
        for path in (treebank / "wsj" / section).iterdir():
            path.unlink()
        (treebank / "wsj" / section).rmdir()
    with pytest.raises(DataError, match="section\\(s\\) 23 of the test split"):
        list(ptb_split_pairs(treebank, "test"))
    with pytest.raises(DataError, match="section\\(s\\) 05 of the train split"):
        list(ptb_split_pairs(treebank, "train"))
    with pytest.raises(DataError, match="Unknown split 'valid'"):
        split_files(treebank, "valid")


def test_section_without_mrg_files(treebank):
    for path in (treebank / "wsj" / "22").iterdir():
        path.rename(path.with_suffix(".txt"))
    with pytest.raises(DataError, match=r"22: no \.mrg files"):
        list(ptb_split_pairs(treebank, "dev"))


def test_unreadable_tree_names_file_tree_and_line(treebank):
    bad = treebank / "wsj" / "23" / "wsj_2301.mrg"
    bad.write_text(MRG.format(section="23", file="2301").replace("(CD 2301) ))))", "(CD 2301) )))"))
    with pytest.raises(DataError, match=f"{bad}: tree 2 \\(line 6\\): 1 bracket"):
        list(ptb_split_pairs(treebank, "test"))


def test_tree_file_one_tree_per_line(tmp_path):
    path = tmp_path / "dev.trees.gz"
    lines = [
        "(TOP (S (NP (NNP Vinken)) (VP (VBZ is) (ADJP (JJ old))) (. .)))",
        "(TOP (S (NP-SBJ (-NONE- *)) (VP (VB Go)) (. !)))",
    ]
    path.write_bytes(gzip.compress("".join(f"{line}\n" for line in lines).encode()))
    assert list(tree_file_pairs(path)) == [
        ("Vinken is old .", "(S (NP XX )NP (VP XX (ADJP XX )ADJP )VP XX )S"),
        ("Go !", "(S (VP XX )VP XX )S"),
    ]
    with pytest.raises(DataError, match="File not found.*config.data.train_files"):
        list(tree_file_pairs(tmp_path / "missing.trees"))
    only_traces = tmp_path / "traces.trees"
    only_traces.write_text("(S (NN a))\n(S (NP-SBJ (-NONE- *)))\n")
    with pytest.raises(DataError, match="traces.trees, tree 2: no word is left"):
        list(tree_file_pairs(only_traces))


def test_ptb_source_reads_config_data_dir(treebank):
    source = PtbSource(SimpleNamespace(data_dir=str(treebank)))
    assert source.name == "ptb"
    assert source.load("dev") == expected([22])
    tagged = PtbSource(SimpleNamespace(data_dir=str(treebank), pos_tags=True))
    assert tagged.load("dev")[0][1] == "(S (NP NNP NNP )NP (VP VBZ (NP NN CD )NP )VP . )S"
    assert source.cache_key("dev") != tagged.cache_key("dev")
    assert source.cache_key("dev") != source.cache_key("test")
    with pytest.raises(DataError, match="needs config.data.data_dir"):
        PtbSource(SimpleNamespace(data_dir="")).load("dev")


def test_trees_source_reads_one_file_per_split(tmp_path):
    train, dev = tmp_path / "train.trees", tmp_path / "dev.trees"
    train.write_text("(TOP (S (NP (PRP It)) (VP (VBZ rains))))\n\n(S (VP (VB Go)))\n")
    dev.write_text("(S (NP (PRP It)) (VP (VBD rained)))\n")
    source = TreesSource(SimpleNamespace(train_files=str(train), dev_files=str(dev), test_files=""))
    assert source.name == "trees"
    assert source.load("train") == [("It rains", "(S (NP XX )NP (VP XX )VP )S"), ("Go", "(S (VP XX )VP )S")]
    assert source.load("dev") == [("It rained", "(S (NP XX )NP (VP XX )VP )S")]
    assert str(train) in json.loads(source.cache_key("train"))[-1]
    with pytest.raises(DataError, match="config.data.test_files = one file of bracketed trees"):
        source.load("test")


def test_gold_trees_are_the_normalised_trees_of_the_pairs(treebank):
    """EVALB scores against gold trees with their POS tags: the same trees, in the same order, as the pairs."""
    source = PtbSource(SimpleNamespace(data_dir=str(treebank)))
    gold = source.gold_trees("test")
    assert [(" ".join(t.leaves()), t.tags()) for t in gold[:2]] == [
        ("Mr. Vinken is chairman 23 .", ["NNP", "NNP", "VBZ", "NN", "CD", "."]),
        ("It was reported in 2300 .", ["PRP", "VBD", "VBN", "IN", "CD", "."]),
    ]
    assert [" ".join(t.leaves()) for t in gold] == [words for words, _ in source.load("test")]


def test_synthetic_parse_source_linearises_the_grammars_trees():
    source = SyntheticParseSource(SimpleNamespace(synthetic={"seed": 0, "train_size": 30, "dev_size": 5,
                                                             "test_size": 5}))
    pairs, gold = source.load("dev"), source.gold_trees("dev")
    assert len(pairs) == len(gold) == 5
    for (words, target), tree in zip(pairs, gold):
        assert words == " ".join(tree.leaves()) and target.startswith("(S ") and target.endswith(" )S")
        assert target.split().count("XX") == len(words.split())
    # the grammar's own trees, used as built (no bracketed text in between), and already in normal form
    generated = generate_parse_splits(seed=0, train_size=30, dev_size=5, test_size=5)["dev"]
    assert gold == [tree for _, tree in generated] and all(normalize(tree) == tree for tree in gold)


@pytest.fixture
def sample(tmp_path):
    """A flat folder of ten .mrg files, wsj_0001 … wsj_0010, as NLTK's WSJ sample (no section folders)."""
    folder = tmp_path / "treebank" / "combined"
    folder.mkdir(parents=True)
    for f in range(1, 11):
        (folder / f"wsj_{f:04d}.mrg").write_text(MRG.format(section="00", file=f"{f:04d}"))
    (folder / "README").write_text("not a tree file")
    return folder


def test_ratio_split_cuts_any_folder_by_file_in_name_order(sample):
    names = {split: [p.name for p in split_files(sample, split, "ratio:80,10,10")] for split in ("train", "dev", "test")}
    assert names == {"train": [f"wsj_{f:04d}.mrg" for f in range(1, 9)], "dev": ["wsj_0009.mrg"],
                     "test": ["wsj_0010.mrg"]}
    assert [p.name for p in split_files(sample.parent, "dev", "ratio:0.6,0.2,0.2")] == ["wsj_0007.mrg", "wsj_0008.mrg"]
    source = PtbSource(SimpleNamespace(data_dir=str(sample), ptb_split="ratio:80,10,10"))
    assert source.load("test") == [(w.format(section="00", file="0010"), t) for w, t in PAIRS]
    assert source.cache_key("test") != PtbSource(SimpleNamespace(data_dir=str(sample), ptb_split="ratio:8,1,1")).cache_key(
        "dev")
    with pytest.raises(DataError, match="cannot be split ratio:98,1,1 with a file in every split"):
        split_files(sample, "dev", "ratio:98,1,1")
    for bad in ("ratio:80,20", "ratio:80,x,10", "ratio:80,0,20"):
        with pytest.raises(DataError, match="expected three positive shares"):
            split_files(sample, "train", bad)
    with pytest.raises(DataError, match="Treebank folder not found"):
        split_files(sample / "nope", "train", "ratio:80,10,10")


def test_list_split_reads_split_and_globs_per_line(sample, tmp_path):
    listing = tmp_path / "split.txt"
    listing.write_text("# NLTK sample\ntrain wsj_000[1-7].mrg\n\ndev wsj_0008.mrg  # one article\ntest wsj_0009.mrg wsj_0010.mrg\n")
    rule = f"list:{listing}"
    assert [p.name for p in split_files(sample, "test", rule)] == ["wsj_0009.mrg", "wsj_0010.mrg"]
    assert len(split_files(sample, "train", rule)) == 7
    assert PtbSource(SimpleNamespace(data_dir=str(sample), ptb_split=rule)).load("dev")[0][0] == "Mr. Vinken is chairman 00 ."
    listing.write_text("train wsj_000*.mrg\ndev wsj_0008.mrg\ntest wsj_0010.mrg\n")
    with pytest.raises(DataError, match="wsj_0008.mrg is in both the train and the dev split"):
        split_files(sample, "train", rule)
    listing.write_text("train wsj_000*.mrg\ndev wsj_09*.mrg\ntest wsj_0010.mrg\n")
    with pytest.raises(DataError, match="no .mrg file under .* for the dev split"):
        split_files(sample, "test", rule)
    listing.write_text("valid wsj_0001.mrg\n")
    with pytest.raises(DataError, match="split.txt, line 1: expected 'SPLIT GLOB"):
        split_files(sample, "train", rule)
    for bad in ("sections", "list:", "wsj:02"):
        with pytest.raises(DataError, match="expected wsj, ratio:A,B,C"):
            split_files(sample, "train", bad)
