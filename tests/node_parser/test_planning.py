"""Window arithmetic, checked by hand: no models, no text."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_ext_advrag.node_parser.planning import (
    WindowStop,
    build_units,
    extend_embedded_sentence,
    find_breakpoints,
    find_question_glue,
    merge_flags,
    plan_adaptive_centred,
    plan_adaptive_windows,
    plan_fixed_centred,
    plan_fixed_windows,
)


def spans(windows):
    return [(w.first, w.last) for w in windows]


# --- fixed -----------------------------------------------------------------------------------


def test_fixed_a_to_e_window_3_stride_1():
    # A..E -> ABC, BCD, CDE: a fact split across B|C is whole in two windows.
    windows = plan_fixed_windows(5, 3, 1)
    assert spans(windows) == [(0, 3), (1, 4), (2, 5)]
    assert sum(1 for first, last in spans(windows) if first <= 1 and last >= 3) == 2
    assert windows[-1].stop == WindowStop.DOCUMENT_END


@pytest.mark.parametrize(
    ("count", "size", "stride", "expected"),
    [
        (5, 3, 2, [(0, 3), (2, 5)]),
        (6, 3, 2, [(0, 3), (2, 5), (4, 6)]),  # last window partial
        (7, 3, 3, [(0, 3), (3, 6), (6, 7)]),  # no overlap, partial tail
        (2, 3, 1, [(0, 2)]),  # shorter than one window
        (1, 1, 1, [(0, 1)]),
        (0, 3, 1, []),
        (4, 1, 1, [(0, 1), (1, 2), (2, 3), (3, 4)]),
    ],
)
def test_fixed_stride_and_partial_tail(count, size, stride, expected):
    assert spans(plan_fixed_windows(count, size, stride)) == expected


def test_fixed_windows_cover_every_sentence_and_never_exceed_size():
    for count in range(0, 12):
        for size in range(1, 5):
            for stride in range(1, size + 1):
                windows = plan_fixed_windows(count, size, stride)
                covered = {i for first, last in spans(windows) for i in range(first, last)}
                assert covered == set(range(count))
                assert all(0 < last - first <= size for first, last in spans(windows))


def test_fixed_centred_clips_at_edges():
    windows = plan_fixed_centred(5, 3, 1)
    assert [(w.first, w.last, w.centre) for w in windows] == [
        (0, 2, 0),
        (0, 3, 1),
        (1, 4, 2),
        (2, 5, 3),
        (3, 5, 4),
    ]
    assert [w.centre for w in plan_fixed_centred(5, 3, 2)] == [0, 2, 4]
    # An even window holds one more sentence after the centre than before it.
    assert [(w.first, w.last) for w in plan_fixed_centred(6, 4, 1)][2] == (1, 5)


# --- units and breakpoints -------------------------------------------------------------------


def test_units_glue_questions_but_not_across_sections():
    units = build_units(
        tokens=[5, 7, 3, 4],
        sections=[0, 0, 0, 1],
        break_after=[True, False, False, False],
        glue_after=[True, False, True, False],
    )
    # 0+1 glued (glue beats the breakpoint after 0); 2 cannot glue to 3 across the section.
    assert [(u.first, u.last, u.tokens, u.segment) for u in units] == [
        (0, 2, 12, 0),
        (2, 3, 3, 0),
        (3, 4, 4, 1),
    ]


def test_breakpoint_after_semantic_drop():
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    embeddings = np.array([a, a * 0.9 + b * 0.1, a, b, b, b])
    flags = find_breakpoints(embeddings, percentile=90.0)
    assert flags == [False, False, True, False, False, False]
    assert find_breakpoints(embeddings, threshold=0.5) == flags
    assert find_breakpoints(embeddings) == [False] * 6  # both disabled
    assert find_breakpoints(embeddings[:1], percentile=50.0) == [False]


def test_breakpoint_buffer_averages_neighbours():
    # One outlier sentence: buffer=1 breaks around it, buffer=3 smooths it away.
    a, b = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    embeddings = np.array([a, a, a, b, a, a, a])
    assert find_breakpoints(embeddings, threshold=0.5, buffer=1) == [
        False, False, True, True, False, False, False,
    ]  # fmt: skip
    assert not any(find_breakpoints(embeddings, threshold=0.5, buffer=3))


def test_question_glue():
    assert find_question_glue(["Why?", "Because.", "问题：为什么", "因为。", "Last?"]) == [
        True,
        False,
        True,
        False,
        False,  # nothing follows the last question
    ]


# --- adaptive --------------------------------------------------------------------------------


def test_adaptive_windows_budget_and_stride():
    tokens = [10, 10, 10, 10, 10, 10]
    units = build_units(tokens, [0] * 6)
    windows = plan_adaptive_windows(units, [0] * 6, max_tokens=30, stride_ratio=0.5)
    # 3 sentences fit; half of 30 tokens is 15, so the next window starts two sentences on.
    assert spans(windows) == [(0, 3), (2, 5), (4, 6)]
    assert [w.stop for w in windows] == [
        WindowStop.BUDGET,
        WindowStop.BUDGET,
        WindowStop.DOCUMENT_END,
    ]


def test_adaptive_long_sentences_give_short_windows():
    tokens = [50, 5, 5, 5, 5, 50, 5]
    units = build_units(tokens, [0] * 7)
    windows = plan_adaptive_windows(units, [0] * 7, max_tokens=20, stride_ratio=1.0)
    assert spans(windows) == [(0, 1), (1, 5), (5, 6), (6, 7)]


def test_adaptive_windows_never_cross_sections_or_breakpoints():
    tokens = [5] * 8
    sections = [0, 0, 0, 1, 1, 1, 1, 1]
    breaks = [False] * 5 + [True, False, False]
    units = build_units(tokens, sections, breaks)
    windows = plan_adaptive_windows(units, sections, max_tokens=100, stride_ratio=0.5)
    assert spans(windows) == [(0, 3), (3, 6), (6, 8)]
    assert [w.stop for w in windows] == [
        WindowStop.SECTION,
        WindowStop.BREAKPOINT,
        WindowStop.DOCUMENT_END,
    ]


def test_adaptive_no_window_contained_in_previous():
    # The big sentence blocks growth; the window after it must not repeat a subset.
    tokens = [5, 5, 5, 100, 5]
    units = build_units(tokens, [0] * 5)
    windows = plan_adaptive_windows(units, [0] * 5, max_tokens=15, stride_ratio=0.34)
    pairs = spans(windows)
    # (2, 3) would be inside (0, 3): the planner restarts at the blocking sentence instead.
    assert pairs == [(0, 3), (3, 4), (4, 5)]
    assert {i for a, b in pairs for i in range(a, b)} == set(range(5))


def test_adaptive_max_sentences():
    units = build_units([1] * 5, [0] * 5)
    windows = plan_adaptive_windows(units, [0] * 5, 100, 1.0, max_sentences=2)
    assert spans(windows) == [(0, 2), (2, 4), (4, 5)]
    assert windows[0].stop == WindowStop.MAX_SENTENCES


def test_adaptive_centred_grows_right_then_left():
    tokens = [10, 10, 10, 10, 10]
    units = build_units(tokens, [0] * 5)
    windows = plan_adaptive_centred(units, [0] * 5, max_tokens=30)
    assert [(w.centre, w.first, w.last) for w in windows] == [
        (0, 0, 3),  # nothing on the left: all growth goes right
        (1, 0, 3),
        (2, 1, 4),
        (3, 2, 5),
        (4, 2, 5),
    ]
    two = plan_adaptive_centred(units, [0] * 5, max_tokens=20)
    assert (two[2].first, two[2].last) == (2, 4)  # right first


def test_adaptive_centred_respects_segments_and_glue():
    sections = [0, 0, 1, 1]
    units = build_units([5, 5, 5, 5], sections, glue_after=[True, False, False, False])
    windows = plan_adaptive_centred(units, sections, max_tokens=100)
    assert [(w.centre, w.first, w.last) for w in windows] == [
        (0, 0, 2),
        (1, 0, 2),
        (2, 2, 4),
        (3, 2, 4),
    ]


def test_adaptive_centred_forward_ratio():
    units = build_units([10] * 9, [0] * 9)
    centred = plan_adaptive_centred(units, [0] * 9, max_tokens=50, forward_ratio=0.5)
    forward = plan_adaptive_centred(units, [0] * 9, max_tokens=50, forward_ratio=0.75)
    only_right = plan_adaptive_centred(units, [0] * 9, max_tokens=50, forward_ratio=1.0)
    backward = plan_adaptive_centred(units, [0] * 9, max_tokens=50, forward_ratio=0.0)
    assert (centred[4].first, centred[4].last) == (2, 7)  # two before, two after
    assert (forward[4].first, forward[4].last) == (3, 8)  # one before, three after
    assert (only_right[4].first, only_right[4].last) == (4, 9)
    assert (backward[4].first, backward[4].last) == (0, 5)
    # At the document's end a forward window spends its budget backwards.
    assert (only_right[8].first, only_right[8].last) == (4, 9)


# --- embedded text of the sentence unit -------------------------------------------------------


@pytest.mark.parametrize(
    ("centre", "last", "min_tokens", "expected"),
    [
        (0, 4, 0, 1),  # off: the sentence alone
        (0, 4, 3, 1),  # 3 tokens already reach 3
        (0, 4, 4, 2),  # 3 + 4 = 7 >= 4
        (0, 4, 8, 3),  # 3 + 4 = 7 < 8, + 20 = 27
        (2, 4, 8, 3),  # a long sentence stays alone
        (3, 4, 8, 4),  # the window ends: 5 tokens are all there is
        (0, 2, 30, 2),  # never past the window's end
    ],
)
def test_extend_embedded_sentence(centre, last, min_tokens, expected):
    assert extend_embedded_sentence([3, 4, 20, 5], centre, last, min_tokens) == expected


# --- paragraphs ---------------------------------------------------------------------------------


def test_paragraph_breaks():
    from llama_index_ext_advrag.text import paragraph_breaks, split_sentences

    text = "A one. B two.\n\nC three.\nD four.\n \t\n  E five.\r\n\r\nF six."
    sentences = split_sentences(text)
    assert [s.text for s in sentences][-1] == "F six."
    assert paragraph_breaks(text, sentences) == [False, True, False, True, True, False]
    assert paragraph_breaks("Alone.", split_sentences("Alone.")) == [False]  # one sentence
    assert paragraph_breaks("", []) == []


def test_merge_flags():
    assert merge_flags(None, None) is None
    assert merge_flags([True, False, False], None, [False, False, True]) == [True, False, True]
    with pytest.raises(ValueError):
        merge_flags([True], [True, False])


def test_paragraph_barrier_names_its_stop():
    paragraphs = [False, True, False, False]
    units = build_units([5, 5, 5, 5], [0, 0, 0, 0], paragraphs)
    centred = plan_adaptive_centred(units, [0] * 4, 100, paragraph_after=paragraphs)
    assert [(w.first, w.last, w.stop) for w in centred] == [
        (0, 2, WindowStop.PARAGRAPH),
        (0, 2, WindowStop.PARAGRAPH),
        (2, 4, WindowStop.DOCUMENT_END),
        (2, 4, WindowStop.DOCUMENT_END),
    ]
    windows = plan_adaptive_windows(units, [0] * 4, 100, 0.5, paragraph_after=paragraphs)
    assert [(w.first, w.last, w.stop) for w in windows] == [
        (0, 2, WindowStop.PARAGRAPH),
        (2, 4, WindowStop.DOCUMENT_END),
    ]
    # without the flags the same barrier is reported as a breakpoint
    assert plan_adaptive_windows(units, [0] * 4, 100, 0.5)[0].stop == WindowStop.BREAKPOINT


# --- mutation-testing kills (issue 20): edges the examples above leave open ------------------


def reference_breakpoints(vectors, buffer=1, threshold=None, percentile=None):
    """Cosines of the mean of ``buffer`` sentences each side of every cut, written out."""
    count = len(vectors)
    sims = []
    for cut in range(1, count):
        left = np.sum(vectors[max(0, cut - buffer) : cut], axis=0)
        right = np.sum(vectors[cut : min(count, cut + buffer)], axis=0)
        norm = float(np.linalg.norm(left) * np.linalg.norm(right))
        sims.append(float(left @ right) / norm if norm else 0.0)
    if threshold is not None:
        flags = [s < threshold for s in sims]
    else:
        distances = [1.0 - s for s in sims]
        flags = [d > np.percentile(distances, percentile) for d in distances]
    return [*flags, False]


@pytest.mark.parametrize("seed", range(6))
def test_breakpoints_match_a_reference_on_unnormalised_vectors(seed):
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(12, 4)) * rng.uniform(0.1, 10.0, size=(12, 1))
    vectors[5] = 0.0  # a sentence without any vector signal
    for buffer in (1, 2, 3):
        for threshold in (-0.2, 0.1, 0.6):
            expected = reference_breakpoints(vectors, buffer, threshold=threshold)
            assert find_breakpoints(vectors, threshold=threshold, buffer=buffer) == expected
        for percentile in (10.0, 50.0, 90.0):
            expected = reference_breakpoints(vectors, buffer, percentile=percentile)
            assert find_breakpoints(vectors, percentile=percentile, buffer=buffer) == expected
    # the default compares the two sentences themselves
    assert find_breakpoints(vectors, threshold=0.1) == reference_breakpoints(vectors, 1, 0.1)


def test_breakpoint_edges_by_hand():
    a, b, zero = np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.zeros(2)
    assert find_breakpoints(np.array([a, b]), threshold=0.5) == [True, False]  # two sentences
    # the threshold is strict: similarity 1.0 at threshold 1.0 and 0.0 at 0.0 are no breaks
    assert find_breakpoints(np.array([a, a, b]), threshold=1.0) == [False, True, False]
    assert find_breakpoints(np.array([a, b, b]), threshold=0.0) == [False, False, False]
    # a zero vector has similarity 0 to anything (not NaN, not an error)
    assert find_breakpoints(np.array([a, zero, a]), threshold=0.5) == [True, True, False]
    # the percentile is strict too: nothing lies above the 100th
    assert find_breakpoints(np.array([a, b, a, a]), percentile=100.0) == [False] * 4


def test_adaptive_stride_boundary_and_zero_token_units():
    # half of a 20-token window is 10: reached exactly after one 10-token unit
    units = build_units([10, 10, 10, 10], [0] * 4)
    windows = plan_adaptive_windows(units, [0] * 4, max_tokens=20, stride_ratio=0.5)
    assert spans(windows) == [(0, 2), (1, 3), (2, 4)]
    # units without tokens still move the next window on by one unit
    empty = build_units([0, 0, 0, 0], [0] * 4)
    windows = plan_adaptive_windows(empty, [0] * 4, 20, 0.5, max_sentences=2)
    assert spans(windows) == [(0, 2), (1, 3), (2, 4)]


def test_lexical_similarities_by_hand():
    from llama_index_ext_advrag.node_parser.planning import lexical_similarities

    terms = [["virus", "cell"], ["virus", "host"], ["court", "law"], ["court", "judge"]]
    # idf over 4 sentences: df 2 -> log(5/3) + 1, df 1 -> log(5/2) + 1
    two, one = np.log(5 / 3) + 1, np.log(5 / 2) + 1
    got = lexical_similarities(terms, buffer=1)
    # cut 1: {virus: two, cell: one} . {virus: two, host: one} = two^2 / (two^2 + one^2)
    assert got[0] == pytest.approx(two**2 / (two**2 + one**2))
    assert got[1] == 0.0  # no shared word across the topic change
    assert got[2] == pytest.approx(two**2 / (two**2 + one**2))
    # buffer 2: the cut in the middle compares {virus: 2 two, cell, host} with {court: 2 two, ...}
    assert lexical_similarities(terms, buffer=2)[1] == 0.0
    # a side without terms (punctuation-only sentence) is 0.0, not NaN
    assert lexical_similarities([[], ["a"]], buffer=1).tolist() == [0.0]
    assert lexical_similarities([["a"]], buffer=1).size == 0


def test_lexical_buffer_sums_the_blocks_on_each_side():
    from llama_index_ext_advrag.node_parser.planning import lexical_similarities

    terms = [["a"], ["b"], ["a"], ["b"]]
    # buffer 1: no shared word across any cut; buffer 2 at the middle cut: {a, b} vs {a, b}
    assert lexical_similarities(terms, buffer=1).tolist() == [0.0, 0.0, 0.0]
    middle = lexical_similarities(terms, buffer=2)[1]
    assert middle == pytest.approx(1.0)


def test_breaks_from_similarities_threshold_and_percentile():
    from llama_index_ext_advrag.node_parser.planning import breaks_from_similarities

    similarity = np.array([0.9, 0.2, 0.8, 0.85])
    assert breaks_from_similarities(similarity, None, 0.5) == [False, True, False, False, False]
    # distances 0.1, 0.8, 0.2, 0.15: only 0.8 is above their 70th percentile
    assert breaks_from_similarities(similarity, 70.0, None) == [False, True, False, False, False]
    assert breaks_from_similarities(similarity, None, None) == [False] * 5
    assert breaks_from_similarities(np.zeros(0), 50.0, None) == [False]
