# %% [markdown]
# # 08 · End to end: the pack in an ordinary LlamaIndex app, then `advrag compare`
#
# 1. An ordinary app: documents -> `VectorStoreIndex` -> `as_query_engine()`.
# 2. The same app with the pack dropped in: a node parser in `transformations`, a
#    postprocessor in `node_postprocessors`. Nothing else changes.
# 3. Was it worth it? `advrag compare` measures the baseline and the pack's pipelines on the
#    same documents and questions, at equal context size, and draws the chart.
#
# Offline: the app's index in memory (`advrag compare` uses Milvus Lite in a temp folder), the
# packaged embedding model, and no LLM (core's
# `MockLLM`, which the pack treats as no LLM: the "answer" is the prompt with its context).
# With `OPENAI_API_KEY` set, `resolve_llm()` returns OpenAI and the answers are real.

# %%
import tempfile
from pathlib import Path

import pandas as pd
from IPython.display import Image, display
from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.llms import MockLLM

from llama_index_ext_advrag import AdaptiveSlidingWindowNodeParser, WindowReplacementPostprocessor, resolve_embed_model, resolve_llm
from llama_index_ext_advrag.text import count_tokens

DATA = next(p for p in (Path("../data"), Path("data")) if (p / "qa.jsonl").is_file()).resolve()
workdir = Path(tempfile.mkdtemp(prefix="advrag-nb08-"))
llm = resolve_llm() or MockLLM()  # OpenAI with OPENAI_API_KEY, else no LLM
embed_model = resolve_embed_model()
documents = SimpleDirectoryReader(input_files=[DATA / "en_manual.md"]).load_data()
QUESTION = "How long must the RESET pinhole be held for a factory reset, and when is the clip released?"

# %% [markdown]
# ## 1. The ordinary app
#
# LlamaIndex's defaults: `SentenceSplitter` chunks, dense retrieval, top 2.

# %%
index = VectorStoreIndex.from_documents(documents, embed_model=embed_model)
engine = index.as_query_engine(llm=llm)
response = engine.query(QUESTION)
for node in response.source_nodes:
    print(f"{node.score:.2f} {count_tokens(node.node.get_content())} tokens | {node.node.get_content()[:120]!r}")

# %% [markdown]
# ## 2. The same app with the pack
#
# Two additions: `AdaptiveSlidingWindowNodeParser(preset="article")` indexes one node per
# sentence with its window in metadata, and `WindowReplacementPostprocessor(top_n=2)` swaps each
# hit for its window, skipping hits whose sentence is already inside a kept window.

# %%
index = VectorStoreIndex.from_documents(
    documents,
    embed_model=embed_model,
    transformations=[AdaptiveSlidingWindowNodeParser(preset="article")],  # added
)
engine = index.as_query_engine(llm=llm, similarity_top_k=8, node_postprocessors=[WindowReplacementPostprocessor(top_n=2)])  # added
# On Milvus: StorageContext.from_defaults(vector_store=open_vector_store("./rag.db", "docs", dim=384))
response = engine.query(QUESTION)
for node in response.source_nodes:
    trace = node.node.metadata["advrag_trace"]["window_replacement"]
    print(f"{node.score:.2f} {count_tokens(node.node.get_content())} tokens, rank {trace['rank']} | {node.node.get_content()[:120]!r}")
print("\nanswer:", str(response)[:300] if not isinstance(llm, MockLLM) else "(no LLM: the prompt holds the context above)")

# %% [markdown]
# ## 3. Was it worth it? `advrag compare`
#
# In a terminal:
#
# ```bash
# advrag compare --docs data --questions data/qa.jsonl --pipelines baseline,hybrid --k 3 --ks 1,3,5
# ```
#
# Here the same command runs in this kernel (`cli.main`), with its Milvus Lite file, state and
# report in the temp folder. It ingests the documents of `data/` once per parser (the three
# Markdown files and one document per sheet of the workbook), runs every pipeline on the 56
# labelled questions at k = 1, 3, 5, and compares coverage at equal context tokens. Without
# `--questions` it makes probe questions from the documents.

# %%
from llama_index_ext_advrag.cli import main as advrag

exit_status = advrag([
    "compare", "--docs", str(DATA), "--questions", str(DATA / "qa.jsonl"), "--no-llm", "--quiet",
    "--pipelines", "baseline,hybrid", "--k", "3", "--ks", "1,3,5",
    "--uri", str(workdir / "compare.db"), "--state-dir", str(workdir / "state"), "--out", str(workdir / "report"),
])
print("exit status", exit_status)

# %%
display(Image(filename=str(workdir / "report" / "frontier.png"), width=640))

# %%
frontier = pd.read_csv(workdir / "report" / "frontier.csv")
frontier.head(9)

# %% [markdown]
# The report (`report.md`) names a pipeline only when, paired question by question at the same
# token budgets, the 95% bootstrap interval of its gain over the baseline lies above 0 (with at
# least 30 questions; the rule is printed in the report); `results.csv` has one row per pipeline and
# question to look at the misses. Other pipelines: `advrag compare --list`; your own
# combinations: `--spec my_pipelines.yaml` (`docs/compare.md`). To look at one question's
# context and the decision trace: `advrag ask "..." --pipeline hybrid --docs data`.
