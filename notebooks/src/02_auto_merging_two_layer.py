# %% [markdown]
# # 02 · Auto-merging and two-layer retrieval on Milvus, and a restart
#
# Two retrievers whose **whole index lives in Milvus**, so a new process opened on the same
# file (Milvus Lite) or server finds exactly what the process that built it did:
#
# * `HierarchicalAutoMergingRetriever`: searches small chunks, returns a parent when enough of
#   its children are hit (LlamaIndex's auto-merging idea, with the parents in Milvus instead
#   of an in-memory docstore, no duplicated text, reading order, an optional token budget);
# * `TwoLayerMilvusRetriever`: a summary collection routes the question to a unit (a sheet of
#   a workbook, a section of a manual), a details collection answers from inside it.
#
# Everything runs on a Milvus Lite file in a temporary folder with the packaged offline
# embedding model (bge-small-en-v1.5, int8 ONNX). Moving to a Milvus server is a different `uri`
# (`"http://host:19530"`, plus `token=` when the server has authentication).

# %%
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from llama_index.core import VectorStoreIndex

from llama_index_ext_advrag import HierarchicalAutoMergingRetriever, TwoLayerMilvusRetriever, resolve_embed_model, resolve_llm
from llama_index_ext_advrag.evaluation import answer_groups_covered, load_questions
from llama_index_ext_advrag.text import count_tokens

DATA = next(p for p in (Path("../data"), Path("data")) if (p / "qa.jsonl").is_file()).resolve()
workdir = Path(tempfile.mkdtemp(prefix="advrag-nb02-"))
llm = resolve_llm()  # OpenAI when OPENAI_API_KEY is set, else None: the pack's no-LLM paths
print("LLM:", type(llm).__name__ if llm else "none (offline)")

# %% [markdown]
# ## 1. Build the hierarchy in one process ...
#
# A separate Python process (standing in for yesterday's ingestion job) parses the English
# manual into a three-level, sentence-aligned hierarchy (`[512, 128, 32]` tokens), stores the
# leaves with their embeddings and the parents by id in `manual.db`, answers three
# questions, writes the results down and exits.

# %%
QUESTIONS = [
    "How long do you hold the power button to start the FX-40, and how long does it take to boot?",
    "How long must the RESET pinhole be held for a factory reset?",
    "What is the default conflict policy in Bidirectional mode?",
]
build_script = workdir / "build_index.py"
build_script.write_text(textwrap.dedent(f"""
    import json
    from llama_index.core import Document
    from llama_index_ext_advrag import HierarchicalAutoMergingRetriever

    text = open({str(DATA / "en_manual.md")!r}, encoding="utf-8").read()
    retriever = HierarchicalAutoMergingRetriever.from_documents(
        [Document(text=text, id_="en_manual.md")], uri={str(workdir / "manual.db")!r},
        chunk_sizes=[512, 128, 32], similarity_top_k=8,
    )
    results = {{q: [n.node.node_id for n in retriever.retrieve(q)] for q in {QUESTIONS!r}}}
    json.dump(results, open({str(workdir / "built.json")!r}, "w"))
"""))
completed = subprocess.run([sys.executable, str(build_script)], capture_output=True, text=True)
print("build process exit status:", completed.returncode, completed.stderr[-500:] if completed.returncode else "")
built = json.loads((workdir / "built.json").read_text())

# %% [markdown]
# ## 2. ... and reopen it here, from the file alone
#
# `from_uri` needs only the uri (and the index name, when not the default): the layout record
# stored beside the collections gives the collection names, chunk sizes and the embedding
# model's name and dimension. Same questions, same nodes:

# %%
embed_model = resolve_embed_model()  # the packaged bge-small-en-v1.5 (offline extra)
retriever = HierarchicalAutoMergingRetriever.from_uri(str(workdir / "manual.db"), embed_model=embed_model, similarity_top_k=8)
for question in QUESTIONS:
    same = [n.node.node_id for n in retriever.retrieve(question)] == built[question]
    print("identical after restart:", same, "|", question[:60])

# %% [markdown]
# ## 3. What merged, and why
#
# Each returned node's trace lists the retrieved leaves it stands for and every merge that
# produced it: a parent replaces its retrieved children when they are more than `merge_ratio`
# (0.5) of its children.

# %%
for node in retriever.retrieve(QUESTIONS[0]):
    trace = node.node.metadata["advrag_trace"]["auto_merging"]
    merges = [f"{len(m['children_retrieved'])}/{m['children_total']} children" for m in trace["merges"]]
    print(f"{node.score:.2f} level={trace['level']} tokens={trace['tokens']:3d} retrieved leaves={len(trace['leaf_ids'])} merges={merges or '-'}")
    print("     ", node.node.text[:90].replace("\n", " "))

# %% [markdown]
# ## 4. Merged context vs the plain leaves
#
# The leaves collection is an ordinary `MilvusVectorStore`, so a plain LlamaIndex
# `VectorStoreIndex` can query it: that is the baseline (top-8 small chunks, no merging).
# On the manual's answerable questions: how many pieces reach the LLM, how many tokens they
# cost, and is every part of the answer in them? A token budget (`max_context_tokens`) caps
# the merging. On this small manual the top-8 leaves already hold most answers, so merging
# buys fewer, readable passages for a few more tokens; on COVID-QA (400 questions, README)
# it raised coverage from 0.588 (core's `AutoMergingRetriever`) to 0.615.

# %%
questions = [q for q in load_questions(DATA / "qa.jsonl") if q.source == "en_manual.md" and q.answerable]
plain = VectorStoreIndex.from_vector_store(retriever.vector_store, embed_model=embed_model).as_retriever(similarity_top_k=8)
budgeted = HierarchicalAutoMergingRetriever.from_uri(str(workdir / "manual.db"), embed_model=embed_model, similarity_top_k=8, max_context_tokens=150)
rows = []
for name, candidate in [("leaves only (core retriever)", plain), ("auto-merging", retriever), ("auto-merging, 150-token budget", budgeted)]:
    results = [candidate.retrieve(q.question) for q in questions]
    contexts = ["\n".join(n.node.get_content() for n in nodes) for nodes in results]
    coverage = sum(answer_groups_covered(c, q.answer_groups) for c, q in zip(contexts, questions)) / len(questions)
    rows.append({
        "retriever": name,
        "pieces per question": round(sum(map(len, results)) / len(results), 1),
        "mean tokens": round(sum(map(count_tokens, contexts)) / len(contexts)),
        "answers fully in context": round(coverage, 2),
    })
pd.DataFrame(rows)

# %% [markdown]
# ## 5. Two layers over a workbook: route to the sheet, then answer from it
#
# `data/tables.xlsx` has yearly sales sheets (`2022年销售`, `2023年销售`) with identical
# columns, plus `Staff` and `Warehouses`. A one-layer index cannot tell the two sales sheets
# apart (and bge-small-en-v1.5 reads no Chinese); the summary layer adds the years in the sheet
# name (`Year: 2023 (2023年)`) and ranks routes by similarity **plus the overlap of cues**
# (numbers, names) between the question and the sheet name. With an LLM, a short LLM summary
# is appended to each sheet's summary; without one (here) the summary is the name, years,
# columns and first rows, and `summary_source` says which was used.

# %%
tables = TwoLayerMilvusRetriever.from_excel(DATA / "tables.xlsx", uri=str(workdir / "tables.db"), embed_model=embed_model, llm=llm)
for question in [
    "2023年华东区域的销售额合计是多少万元？",
    "2022年产品“云梯X1”一共卖出了多少件？",
    "How many employees work in the Engineering department?",
    "Which warehouse code has the largest number of staff?",
]:
    route = tables.retrieve(question)[0].node.metadata["advrag_trace"]["two_layer"]["route"]
    print(f"{question[:45]:45s} -> " + ", ".join(f"{r['unit_name']} ({r['similarity']:.2f} + cue {r['cue_overlap']:.1f})" for r in route))

# %% [markdown]
# The details layer returns the whole routed sheet as Markdown (`details_mode="fetch"`, the
# workbook default), ready for an LLM or for the table route of notebook 03:

# %%
print(tables.retrieve("2023年华东区域的销售额合计是多少万元？")[0].node.text[:300])

# %% [markdown]
# ## 6. How sure is the route? Similarity alone vs similarity + cues
#
# `cue_weight=0` routes on the embedding alone. The chart shows, for every sales question
# in `data/qa.jsonl`, the score of each sales sheet with and without the cue term.

# %%
sales_questions = [q.question for q in load_questions(DATA / "qa.jsonl") if q.source == "tables.xlsx" and ("2022" in q.question or "2023" in q.question)]
embedding_only = TwoLayerMilvusRetriever.from_uri(str(workdir / "tables.db"), embed_model=embed_model, cue_weight=0.0)
fig, axes = plt.subplots(1, 2, figsize=(10, 3), sharey=True)
for axis, (title, candidate) in zip(axes, [("embedding only", embedding_only), ("embedding + cues", tables)]):
    for number, question in enumerate(sales_questions):
        route = candidate.retrieve(question)[0].node.metadata["advrag_trace"]["two_layer"]["route"]
        for r in route:
            if "销售" in r["unit_name"]:
                axis.scatter(number, r["score"], color="#27a" if r["unit_name"].startswith("2023") else "#c52", label=r["unit_name"][:4])
    axis.set_title(title)
    axis.set_xlabel("sales question")
handles = {h.get_label(): h for h in axes[1].collections}
axes[1].legend(handles.values(), ["2022 sheet" if k == "2022" else "2023 sheet" for k in handles], fontsize=8)
axes[0].set_ylabel("route score")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Moving to a Milvus server
#
# Nothing changes but the uri: `HierarchicalAutoMergingRetriever.from_documents(docs,
# uri="http://milvus.internal:19530", token="user:password")` builds on a server (Milvus 2.3+,
# standalone or cluster; Zilliz Cloud takes its API key as `token`), and `from_uri` with the
# same uri reopens it from any machine. See the README, "From Milvus Lite to a server".
