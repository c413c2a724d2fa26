"""A fake run_script.py: the config from the argv, finalised, then a few seconds of "training"."""
import sys
import time
from types import SimpleNamespace

FLAGS = {"-tp": "model.tensor_model_parallel_size", "-pp": "model.pipeline_model_parallel_size",
         "-vp": "model.virtual_pipeline_model_parallel_size",
         "-cp": "model.context_parallel_size", "-ep": "model.expert_model_parallel_size",
         "-et": "model.expert_tensor_parallel_size", "-sl": "model.seq_length",
         "-gb": "train.global_batch_size", "-mb": "train.micro_batch_size",
         "-ms": "train.train_iters"}
OTHER_FLAGS = {"-m", "-mr", "-g", "-ng", "-gn", "-c", "--task"}


def scalar(text):
    if text in ("true", "false"):
        return text == "true"
    if text in ("null", "None"):
        return None
    try:
        return int(text)
    except ValueError:
        return text


def put(cfg, path, value):
    *parents, last = path.split(".")
    for p in parents:
        if not hasattr(cfg, p):
            setattr(cfg, p, SimpleNamespace())
        cfg = getattr(cfg, p)
    setattr(cfg, last, value)


def main(argv):
    cfg = SimpleNamespace(model=SimpleNamespace(), train=SimpleNamespace(),
                          ddp=SimpleNamespace(), optimizer=SimpleNamespace(),
                          comm_overlap=SimpleNamespace())
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in FLAGS:
            put(cfg, FLAGS[word], scalar(argv[i + 1]))
            i += 2
            continue
        if word in OTHER_FLAGS:
            i += 2
            continue
        key, text = word.split("=", 1)
        key = key.lstrip("+~")
        if key == "comm_overlap" and text.startswith("{"):
            for item in text[1:-1].split(","):
                name, value = item.split(":", 1)
                setattr(cfg.comm_overlap, name, scalar(value))
        elif key != "comm_overlap":
            put(cfg, key, scalar(text))
        i += 1
    from megatron.bridge.training.config import runtime_config_update
    runtime_config_update(cfg)
    for step in range(1, 4):
        print(f"fake run_script: iteration {step}/{cfg.train.train_iters}", flush=True)
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1:])
