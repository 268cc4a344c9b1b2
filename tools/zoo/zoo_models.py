"""The models of the zoo (issue 17): what gen.py exports and how.

Each Spec says how to build the torch module (seeded random weights, never
downloaded: weights=None, weights_backbone=None), which opsets to try, the
input and output names, the dynamic axes, and two input sets: "a", the
example the export traces, and "b", another batch and/or resolution for
every model with dynamic axes (absent for the few fixed-shape models).
`kind` tells the runner how to compare: "tensor" (element-wise), "detect"
(boxes/scores/labels outputs, matched box to box for fp16/int8).

`big` marks the models whose files exceed ~90 MB or whose runs take seconds
(resnet50, vit_b_16, fcn_resnet50, retinanet_resnet50_fpn, unet_1024).
"""
from collections import OrderedDict

import numpy as np

import zoo_data as D

CLASSIC = (9, 13, 17)


class Spec:
    def __init__(self, name, build, inputs, outputs, opsets=(17,), dynamic=None, kind="tensor",
                 big=False, note="", calib=None, export_module=None, onnx_build=None,
                 post_calib=None, variant_builds=None):
        self.name = name
        self.build = build            # () -> nn.Module (called after seeding)
        self.inputs = inputs          # rng -> (OrderedDict a, OrderedDict b or None)
        self.outputs = outputs
        self.opsets = tuple(opsets)
        self.dynamic = dynamic or {}
        self.kind = kind
        self.big = big
        self.note = note
        self.calib = calib            # (module, rng) -> None: BN calibration forward passes
        self.post_calib = post_calib  # (module, rng) -> None: after calibration, in eval()
        self.export_module = export_module  # module -> module to export (e.g. jit.script)
        self.onnx_build = onnx_build  # opset -> ModelProto, for graphs built with onnx.helper
        # {variant: opset -> ModelProto}: a variant written by its own
        # builder instead of to_fp16.py / to_int8.py
        self.variant_builds = variant_builds or {}


def od(**kw):
    return OrderedDict(kw)


# ------------------------------------------------------------------ torchvision

def tv(fn, **kw):
    def build():
        import torchvision
        return getattr_path(torchvision.models, fn)(weights=None, **kw)
    return build


def img_inputs(size, size_b=None, batch_b=2):
    h, w = (size, size) if isinstance(size, int) else size
    hb, wb = size_b or (h, w)

    def make(rng):
        return (od(input=D.image(rng, (1, 3, h, w))),
                od(input=D.image(rng, (batch_b, 3, hb, wb))))
    return make


IMG_DYN = {"input": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}}
BATCH_DYN = {"input": {0: "batch"}, "logits": {0: "batch"}}


def classifier(name, fn, size=224, size_b=(192, 256), opsets=(17,), spatial=True, big=False,
               **kw):
    return Spec(name, tv(fn, **kw), img_inputs(size, size_b if spatial else None), ["logits"],
                opsets, IMG_DYN if spatial else BATCH_DYN, big=big)


class DetWrap:
    """torchvision detectors take a list of [3, H, W] images and return a
    list of dicts; the exported graph takes one image, returns three tensors."""

    @staticmethod
    def spread(module, rng, target=2.5):
        """Random heads score every anchor alike (softmax ~ 1/91, RetinaNet's
        sigmoid at its 0.01 prior): thousands of scores sit within 1e-6 of
        each other and of the threshold, and which boxes survive depends on
        the last bit.  After BN calibration, the score convs' weights are
        scaled so that their logits vary with std `target` around the bias,
        as a trained head's do (RetinaNet 1.2: its top 300 of ~9M logits sit
        ~5 std up, and at 2.5 they all saturate to 1.0, a constant)."""
        import torch
        head = module.det.head.classification_head
        convs = [b[-1] for b in head.module_list] if hasattr(head, "module_list") else \
            [head.cls_logits]
        seen = []
        hooks = [c.register_forward_hook(
            lambda m, i, o: seen.append((o - m.bias.view(1, -1, 1, 1)).flatten()))
            for c in convs]
        with torch.no_grad():
            module(torch.from_numpy(D.image(rng, (3, 320, 320), normalize=False)))
            std = float(torch.cat(seen).std())
            for c in convs:
                c.weight.mul_(target / max(std, 1e-12))
        for h in hooks:
            h.remove()

    @staticmethod
    def make(fn, **kw):
        def build():
            import torch
            from torchvision.models import detection

            class Wrap(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.det = getattr(detection, fn)(weights=None, weights_backbone=None, **kw)

                def forward(self, images):
                    d = self.det([images])[0]
                    return d["boxes"], d["scores"], d["labels"]
            return Wrap()
        return build

    @staticmethod
    def calib(module, rng):
        import torch
        module.det([torch.from_numpy(D.image(rng, (3, 320, 320), normalize=False)),
                    torch.from_numpy(D.image(rng, (3, 288, 352), normalize=False))])


def detector(name, fn, big=False, spread=None, **kw):
    def inputs(rng):
        return (od(images=D.image(rng, (3, 320, 320), normalize=False)),
                od(images=D.image(rng, (3, 256, 352), normalize=False)))
    return Spec(name, DetWrap.make(fn, **kw), inputs, ["boxes", "scores", "labels"], (17,),
                {"images": {1: "height", 2: "width"}, "boxes": {0: "n"}, "scores": {0: "n"},
                 "labels": {0: "n"}}, kind="detect", big=big, calib=DetWrap.calib,
                post_calib=(lambda m, rng: DetWrap.spread(m, rng, spread)) if spread else None)


def segmenter(name, fn, big=False):
    def build():
        import torch
        from torchvision.models import segmentation

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.seg = getattr(segmentation, fn)(weights=None, weights_backbone=None,
                                                     aux_loss=False)

            def forward(self, x):
                return self.seg(x)["out"]
        return Wrap()
    return Spec(name, build, img_inputs(320, (256, 288)), ["out"], (17,),
                {"input": {0: "batch", 2: "height", 3: "width"},
                 "out": {0: "batch", 2: "height", 3: "width"}}, big=big)


def r3d():
    def inputs(rng):
        return (od(input=D.video(rng, (1, 3, 8, 112, 112))),
                od(input=D.video(rng, (2, 3, 8, 112, 112))))
    return Spec("r3d_18", tv("video.r3d_18"), inputs, ["logits"], (17,), BATCH_DYN)


def raft():
    def build():
        import torch
        from torchvision.models.optical_flow import raft_small

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.raft = raft_small(weights=None)

            def forward(self, image1, image2):
                return self.raft(image1, image2)[-1]
        return Wrap()

    def pair(rng, h, w):
        big = D.image(rng, (1, 3, h + 8, w + 8), normalize=False) * 2 - 1
        return od(image1=big[:, :, 4:4 + h, 4:4 + w].copy(),
                  image2=big[:, :, 6:6 + h, 3:3 + w].copy())   # shifted by (2, -1)

    def calib(module, rng):
        import torch
        a = pair(rng, 128, 128)
        b = pair(rng, 128, 128)
        module(torch.from_numpy(np.concatenate([a["image1"], b["image1"]])),
               torch.from_numpy(np.concatenate([a["image2"], b["image2"]])))
    dyn = {"image1": {2: "height", 3: "width"}, "image2": {2: "height", 3: "width"},
           "flow": {2: "height", 3: "width"}}
    return Spec("raft_small", build, lambda rng: (pair(rng, 128, 128), pair(rng, 96, 160)),
                ["flow"], (16,), dyn, calib=calib,
                note="opset 16: torch 1.13 exports grid_sample only there")


def getattr_path(obj, path):
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


# ------------------------------------------------------------------ the perf issue's shapes

def custom(cls, *args, **kw):
    def build():
        import zoo_modules
        return getattr(zoo_modules, cls)(*args, **kw)
    return build


def mnv3_cls():
    return Spec("mnv3_cls_48x192", tv("mobilenet_v3_small", num_classes=2, width_mult=0.5),
                img_inputs((48, 192), (48, 192)), ["logits"], CLASSIC, BATCH_DYN,
                note="PP-OCR text-direction classifier shape")


def svtr():
    return Spec("svtr_48x320", custom("SVTR"), img_inputs((48, 320), (48, 160)), ["probs"],
                (13, 17), {"input": {0: "batch", 3: "width"}, "probs": {0: "batch", 1: "steps"}})


def dbnet():
    return Spec("dbnet_480x640", custom("DBNet"), img_inputs((480, 640), (320, 320), batch_b=1),
                ["prob"], CLASSIC, {"input": {0: "batch", 2: "height", 3: "width"},
                                    "prob": {0: "batch", 2: "height", 3: "width"}})


def vad():
    def inputs(rng):
        hid = 64
        a = od(audio=D.speech(rng, 512)[None], sr=np.array(16000, np.int64),
               h=np.zeros((1, hid), np.float32), c=np.zeros((1, hid), np.float32))
        b = od(audio=D.speech(rng, 256, 8000)[None], sr=np.array(8000, np.int64),
               h=(rng.standard_normal((1, hid)) * 0.3).astype(np.float32),
               c=(rng.standard_normal((1, hid)) * 0.3).astype(np.float32))
        return a, b
    return Spec("vad_step", custom("VadStep"), inputs, ["prob", "h_out", "c_out"], (13, 17),
                {"audio": {1: "samples"}}, export_module=script,
                note="If on sr: 16 kHz chunks of 512 samples, 8 kHz chunks of 256")


def unet():
    return Spec("unet_1024", custom("UNet"), img_inputs((1024, 1024), (512, 512), batch_b=1),
                ["mask"], (17,), {"input": {2: "height", 3: "width"},
                                  "mask": {2: "height", 3: "width"}}, big=True)


# ------------------------------------------------------------------ modules as people build them

def encoder():
    def inputs(rng):
        def one(b, s, pad):
            x = rng.standard_normal((b, s, 256)).astype(np.float32)
            m = np.zeros((b, s), bool)
            m[:, s - pad:] = True
            return od(x=x, pad_mask=m)
        return one(1, 64, 8), one(2, 48, 5)
    return Spec("transformer_encoder", custom("Encoder"), inputs, ["y"], (13, 17),
                {"x": {0: "batch", 1: "seq"}, "pad_mask": {0: "batch", 1: "seq"},
                 "y": {0: "batch", 1: "seq"}})


GPT_DYN = {"input_ids": {0: "batch", 1: "seq"}, "past": {2: "batch", 4: "past_len"},
           "logits": {0: "batch", 1: "seq"}, "present": {2: "batch", 4: "total_len"}}


def gpt(name, seq_a, past_a, seq_b, past_b, opsets):
    def inputs(rng):
        def one(s, p):
            past = (rng.standard_normal((2, 2, 1, 4, p, 32)) * 0.5).astype(np.float32)
            return od(input_ids=D.tokens(rng, (1, s), 2048), past=past)
        return one(seq_a, past_a), one(seq_b, past_b)
    return Spec(name, custom("GPT"), inputs, ["logits", "present"], opsets, GPT_DYN)


def rnn(kind, name, t_a, b_b, t_b, opsets=CLASSIC):
    def inputs(rng):
        def one(b, t):
            d = od(x=D.features(rng, t, 80, b),
                   h=(rng.standard_normal((2, b, 128)) * 0.3).astype(np.float32))
            if kind == "lstm":
                d["c"] = (rng.standard_normal((2, b, 128)) * 0.3).astype(np.float32)
            return d
        return one(1, t_a), one(b_b, t_b)
    outs = ["y", "h_out", "c_out"] if kind == "lstm" else ["y", "h_out"]
    dyn = {"x": {0: "batch", 1: "time"}, "h": {1: "batch"}, "c": {1: "batch"},
           "y": {0: "batch", 1: "time"}, "h_out": {1: "batch"}, "c_out": {1: "batch"}}
    if kind != "lstm":
        del dyn["c"], dyn["c_out"]
    return Spec(name, custom("RNNStack", kind), inputs, outs, opsets, dyn)


def script(m):
    import torch
    return torch.jit.script(m)


def scripted(name, cls, inputs, outs, dyn):
    import_ = custom(cls)
    return Spec(name, import_, inputs, outs, (13, 17), dyn, export_module=script)


def script_if():
    def inputs(rng):
        return (od(x=D.image(rng, (1, 8, 16, 16)), gate=np.array([0.7], np.float32)),
                od(x=D.image(rng, (2, 8, 12, 20)), gate=np.array([-0.4], np.float32)))
    return scripted("script_if", "ScriptIf", inputs, ["y"],
                    {"x": {0: "batch", 2: "height", 3: "width"},
                     "y": {0: "batch", 2: "height", 3: "width"}})


def script_loop():
    def inputs(rng):
        return (od(x=D.features(rng, 10, 32), h=np.zeros((1, 32), np.float32)),
                od(x=D.features(rng, 5, 32, 2),
                   h=(rng.standard_normal((2, 32)) * 0.5).astype(np.float32)))
    return scripted("script_loop", "ScriptLoop", inputs, ["ys", "h_out"],
                    {"x": {0: "batch", 1: "time"}, "h": {0: "batch"},
                     "ys": {0: "batch", 1: "time"}, "h_out": {0: "batch"}})


def yolo():
    return Spec("yolo_head", custom("YoloHead"), img_inputs(320, (256, 384), batch_b=1),
                ["pred"], CLASSIC, {"input": {0: "batch", 2: "height", 3: "width"},
                                    "pred": {0: "batch", 1: "anchors"}})


def stft17():
    def inputs(rng):
        return (od(signal=D.speech(rng, 16000)[None, :, None]),
                od(signal=D.speech(rng, 8000)[None, :, None]))

    def build(opset):
        import zoo_onnx
        return zoo_onnx.stft_logmel(opset)
    return Spec("stft17_logmel", None, inputs, ["logmel"], (17,), kind="tensor",
                onnx_build=build, note="onnx.helper: HannWindow, STFT, MelWeightMatrix")


def nbits_decoder():
    """A GPT-style decoder whose projections are com.microsoft MatMulNBits
    (4-bit weights, ONNX Runtime's int4 weight-only layout).  Its int8
    variant is the same graph with accuracy_level 4 (A quantized to int8
    per block inside each MatMulNBits), judged with the int8 tolerance."""
    def inputs(rng):
        return (od(ids=D.tokens(rng, (1, 16), 512)), od(ids=D.tokens(rng, (2, 24), 512)))

    def build(acc):
        def make(opset):
            import gen_nbits_decoder
            return gen_nbits_decoder.model(acc)
        return make
    return Spec("nbits_decoder", None, inputs, ["logits"], (17,), kind="tensor",
                onnx_build=build(0), variant_builds={"int8": build(4)},
                note="onnx.helper: MatMulNBits 4-bit; int8 = accuracy_level 4")


SPECS = [
    classifier("resnet18", "resnet18", opsets=CLASSIC),
    classifier("resnet50", "resnet50", big=True),
    classifier("mobilenet_v2", "mobilenet_v2", opsets=CLASSIC),
    classifier("mobilenet_v3_small", "mobilenet_v3_small"),
    classifier("mobilenet_v3_large", "mobilenet_v3_large"),
    classifier("efficientnet_b0", "efficientnet_b0", opsets=CLASSIC),
    classifier("regnet_y_400mf", "regnet_y_400mf"),
    classifier("shufflenet_v2_x1_0", "shufflenet_v2_x1_0", opsets=CLASSIC),
    classifier("squeezenet1_1", "squeezenet1_1", opsets=CLASSIC),
    classifier("densenet121", "densenet121"),
    classifier("googlenet", "googlenet", opsets=CLASSIC, aux_logits=False, init_weights=True),
    classifier("inception_v3", "inception_v3", size=299, size_b=(299, 299), aux_logits=False,
               init_weights=True),
    classifier("mnasnet1_0", "mnasnet1_0"),
    classifier("convnext_tiny", "convnext_tiny"),
    classifier("vit_b_16", "vit_b_16", spatial=False, big=True),
    classifier("swin_t", "swin_t", spatial=False),
    detector("ssdlite320_mobilenet_v3_large", "ssdlite320_mobilenet_v3_large", spread=2.5),
    detector("fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn",
             box_score_thresh=0.005),
    detector("retinanet_resnet50_fpn", "retinanet_resnet50_fpn", big=True, spread=1.2,
             min_size=320, max_size=512),
    segmenter("deeplabv3_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large"),
    segmenter("lraspp_mobilenet_v3_large", "lraspp_mobilenet_v3_large"),
    segmenter("fcn_resnet50", "fcn_resnet50", big=True),
    r3d(),
    raft(),
    mnv3_cls(),
    svtr(),
    dbnet(),
    vad(),
    unet(),
    encoder(),
    gpt("gpt_decode_step", 1, 127, 1, 31, (13, 17)),
    gpt("gpt_prefill_128", 128, 0, 64, 0, (17,)),
    rnn("lstm", "lstm_stream_step", 1, 1, 4),
    rnn("lstm", "lstm_seq100", 100, 2, 50),
    rnn("gru", "gru_stream_step", 1, 1, 4),
    rnn("gru", "gru_seq100", 100, 2, 50),
    script_if(),
    script_loop(),
    yolo(),
    stft17(),
    nbits_decoder(),
]
BY_NAME = OrderedDict((s.name, s) for s in SPECS)
