"""The fake's finalisation: the comm_overlap fields onto their sections."""

HOLDERS = {
    "overlap_grad_reduce": "ddp", "overlap_param_gather": "ddp", "align_param_gather": "ddp",
    "bucket_size": "ddp", "overlap_param_gather_with_optimizer_step": "optimizer",
}


def runtime_config_update(cfg):
    for field, value in vars(cfg.comm_overlap).items():
        if field != "_target_":
            setattr(getattr(cfg, HOLDERS.get(field, "model")), field, value)
