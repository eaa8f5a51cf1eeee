"""Launcher of the code job (`codapo_trl.jobs.train_code`, also the console script `codapo-train-code`).

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 recipes/codapo_code.py \
        --config recipes/Qwen2.5-Math-1.5B/codapo/config_code.yaml
"""

from codapo_trl.jobs.train_code import main


if __name__ == "__main__":
    main()
