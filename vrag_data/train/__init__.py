"""The bundled trainer: SFT on the exports and multi-turn GRPO / RS-GRPO / SPO in the environment.

`sft.run_sft(cfg)` and `rl.run_rl(cfg)` take a `config.TrainConfig` (configs/train/*.yaml); `advantages` holds the
pure estimators, `tiny` the CPU test model, `data` the Qwen2-VL input builder.
"""
