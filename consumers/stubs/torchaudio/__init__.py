"""Stand-in for torchaudio in the LLaMA-Factory check (no registry wheel of it imports beside the CPU torch here).

LLaMA-Factory's multimodal plugin imports torchaudio at module load for audio inputs only; the exports have
no audio, so nothing here is ever called. Using it is an error, never a silent no-op."""


def __getattr__(name: str):
    raise RuntimeError(f"torchaudio.{name} used: the LLaMA-Factory check has no audio; this stub is import-only")
