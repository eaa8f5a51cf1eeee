"""Launcher of the main job (`codapo_trl.jobs.train`, also the console script `codapo-train`).

    accelerate launch --config_file accelerate_configs/zero3.yaml recipes/codapo_math.py \
        --config recipes/Qwen2.5-Math-1.5B/codapo/config_math.yaml
"""

from codapo_trl.jobs.train import main


if __name__ == "__main__":
    main()
