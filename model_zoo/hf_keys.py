"""Reading a Hugging Face ``config.json``: the file within the spec limits, key access
that names the missing key, the sizes refused before anything is built, the longest
sequence a config states, and the dropout rates its family trains with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopar_opt.core import limits

_MISSING = object()


class HfConfigError(ValueError):
    """A config the importer cannot read; the message names the key and the fix."""


class Cfg:
    """Key access that names the missing key, the model type and the file."""

    def __init__(self, data: dict[str, Any], origin: str) -> None:
        self.data, self.origin = data, origin
        self.model_type = str(data.get("model_type"))

    def __call__(self, key: str, default: Any = _MISSING) -> Any:
        value = self.data.get(key, default)
        if value is _MISSING or (value is None and default is _MISSING):
            if dict.__contains__(self.data, key):      # stated as null (QA round 9: "missing")
                raise HfConfigError(
                    f"{self.origin}: model_type {self.model_type!r} needs key {key!r}, which "
                    f"is null (fix: give its value from the model's published config.json)")
            raise HfConfigError(
                f"{self.origin}: model_type {self.model_type!r} needs key {key!r}, which is "
                f"missing (fix: add {key!r} from the model's published config.json)")
        return value


class TrackedConfig(dict):
    """A config's keys, recording which ones the readers looked up: present (``read``) or
    absent (``absent``, in lookup order). A key a reader looks up and does not find is
    one whose ``transformers`` default the build took: :func:`defaulted_keys` says which
    of those shape the architecture, and :func:`misspelt_key` catches a stated key no
    reader looked up that is a near-spelling of one (``num_key_value_head``), which
    ``transformers`` itself ignores as silently."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] = set()
        self.absent: list[str] = []

    def _look(self, key: Any) -> bool:
        found = dict.__contains__(self, key)
        if found:
            self.read.add(key)
        elif key not in self.absent:
            self.absent.append(key)
        return found

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, key, default) if self._look(key) else default

    def __getitem__(self, key: Any) -> Any:
        self._look(key)
        return dict.__getitem__(self, key)

    def __contains__(self, key: Any) -> bool:
        return self._look(key)

    def derived(self, **values: Any) -> "TrackedConfig":
        """A copy with ``values`` set, recording its lookups here (a reader that fills
        a family default in, e.g. Gemma's head width, keeps the record whole)."""
        out = TrackedConfig({**self, **values})
        out.read, out.absent = self.read, self.absent
        return out


#: Keys whose absence changes the built architecture, in groups of keys that state the
#: same thing in different families: the attention layout (GQA's key-value heads,
#: Falcon's multi-query switches), the MLP activation, tying, the parallel block, and
#: the MoE routing (experts per token, shared experts, leading dense layers), the sliding
#: attention window. When a
#: reader looked up a key of a group and the config states none of the group's keys,
#: the ``transformers`` default it took is said (``autopar model``, ``estimate``,
#: ``solve``). Keys whose default is hidden/heads or a width the architecture line
#: prints (``head_dim``, the MLP width) are left to that line.
ARCH_GROUPS = (("num_key_value_heads", "num_kv_heads", "multi_query", "new_decoder_architecture"),
               ("hidden_act", "hidden_activation", "activation_function"),
               ("tie_word_embeddings",), ("parallel_attn", "use_parallel_residual"),
               ("num_experts_per_tok",), ("n_shared_experts",), ("first_k_dense_replace",),
               ("shared_expert_intermediate_size",),
               # a family default of 4096 keys (Mistral, Gemma 2/3) or none (Mixtral, Phi-3,
               # StarCoder2): attention FLOPs at long sequences hang on it (QA round 11: a
               # Mistral config without it, or with it misspelt, took 4096 without a word)
               ("sliding_window",))
ARCH_KEYS = tuple(k for group in ARCH_GROUPS for k in group)


def defaulted_keys(config: TrackedConfig) -> tuple[str, ...]:
    """The architecture keys (:data:`ARCH_GROUPS`) a reader looked up and did not find,
    of groups none of whose keys the config states."""
    out = []
    for group in ARCH_GROUPS:
        if any(k in config.read for k in group):
            continue
        out += [k for k in config.absent if k in group]
    return tuple(sorted(out, key=config.absent.index))


def misspelt_key(config: TrackedConfig) -> tuple[str, str] | None:
    """(stated key, key meant) for a stated key no reader looked up whose spelling is
    within one or two letters of an architecture key a reader looked up and did not find
    (``num_key_value_head`` for ``num_key_value_heads``), else None."""
    import difflib

    wanted = [k for k in config.absent if k in ARCH_KEYS]
    for key in dict.keys(config):
        if key in config.read or not isinstance(key, str):
            continue
        close = difflib.get_close_matches(key, wanted, n=1, cutoff=0.85)
        if close:
            return key, close[0]
    return None


#: Keys a family's published configs leave to its configuration class's default, which
#: the build takes (and says: ``hf_config._assumed``) rather than refusing the file the
#: model's authors publish: Gemma 3's 4B, 12B and 27B configs state no ``vocab_size`` in
#: their ``text_config``, and the 4B's no ``num_attention_heads`` either: its published
#: text_config states only hidden_size, intermediate_size, num_hidden_layers,
#: rope_scaling and sliding_window (Gemma3TextConfig: ``vocab_size=262_208``,
#: ``num_attention_heads=8``, transformers ``models/gemma3/configuration_gemma3.py``;
#: the key/value heads and head width default through ``hf_parts``). A key absent
#: elsewhere stays an error.
CLASS_DEFAULTS = {"gemma3_text": {"vocab_size": 262_208, "num_attention_heads": 8}}


#: Keys counting layers (bounded by ``limits.MAX_LAYERS``) and keys that must be
#: positive integers when present; every integer is at most ``MAX_DIMENSION``.
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "num_decoder_layers",
              "encoder_layers", "decoder_layers")
POSITIVE_KEYS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
                 "intermediate_size", "num_key_value_heads", "head_dim", "num_experts_per_tok",
                 # Mixtral experts, MoE expert width; GPT-2 / T5 / ViT sizes (a 0 built an
                 # empty or expert-less model silently)
                 "num_local_experts", "moe_intermediate_size", "n_layer", "n_head", "n_embd",
                 "num_layers", "d_model", "d_ff", "num_heads", "image_size", "patch_size",
                 "num_channels",
                 # DeepSeek MLA ranks and head widths, routed experts and their layer
                 # stride (transformers: ``layer_idx % moe_layer_freq``); null stays allowed
                 "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                 "v_head_dim", "n_routed_experts", "moe_layer_freq",
                 # MPT's layers, heads and MLP ratio; BLOOM's hidden size (BloomConfig's
                 # n_embed: a "4096" failed with a TypeError naming no key, a -4096 with
                 # "tied_to 'embed' without tied_params", QA round 11)
                 "n_layers", "n_heads", "expansion_ratio", "n_embed",
                 # T5's decoder depth and head width, BERT's token-type rows (a -1 decoder
                 # built an encoder alone, a "2" failed naming no key: QA round 11)
                 "num_decoder_layers", "d_kv", "type_vocab_size",
                 # the MLP widths of Falcon, OPT and GPT-2 and Falcon's key-value heads (a
                 # -1 built a negative width silently; GPT-2's null n_inner stays 4h), the
                 # longest sequence a config states (0 has no meaning)
                 "ffn_hidden_size", "ffn_dim", "n_inner", "num_kv_heads", "word_embed_proj_dim",
                 "max_position_embeddings", "n_positions", "max_seq_len")


#: Keys stating the longest sequence a config's model takes, in the order they are read.
POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length",
                 "seq_length", "max_seq_len")


def max_positions(config: dict[str, Any]) -> tuple[str, int] | None:
    """(key, value) of the longest sequence the config states (a learned position table
    or a context window), or None (ViT: tokens come from the image; T5 v1.0 may state
    none). A bare config's default training length (``autopar model``)."""
    if config.get("model_type") == "vit":
        return None
    for key in POSITION_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and \
                0 < value <= limits.MAX_SEQ_LEN:
            return key, value
    return None


def load_hf_config(path: str | Path) -> tuple[dict[str, Any], Path]:
    """Read ``path`` (a ``config.json`` or a directory holding one), within the
    spec limits (file size, nesting, sizes; :mod:`autopar_opt.core.limits`)."""
    p = Path(path)
    try:
        if p.is_dir():
            p = p / "config.json"
        is_file = p.is_file()
    except (OSError, ValueError) as exc:
        raise HfConfigError(f"{str(p)[:200]}: cannot be opened ({exc.__class__.__name__}) "
                            "(fix: give a config.json or a directory holding one)") from None
    if not is_file:
        what = "a directory, not a file" if p.is_dir() else "no such file"
        raise HfConfigError(f"{p}: {what} (fix: give a config.json or a directory "
                            "holding one)")
    from autopar_opt.core import reading
    from autopar_opt.core.errors import SpecError

    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        """json keeps a repeated key's last value: note it (refused below)."""
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                repeated.append(key)
            out[key] = value
        return out

    try:                  # size, special files, syntax, nesting, integers of 6,000 digits
        data = reading.read_json(p, reading.HF_CONFIG, parse_int=limits.read_int,
                                 object_pairs_hook=pairs)
    except SpecError as exc:
        first = exc.problems[0]
        raise HfConfigError(f"{p}: {first.rule} (fix: {first.fix})") from None
    if repeated:
        raise HfConfigError(f"{p}: key {repeated[0]!r} appears more than once (JSON readers "
                            "keep the last value, transformers' too; which one was meant is not "
                            "known) (fix: keep one value for it, as the model's published "
                            "config.json does)")
    if not isinstance(data, dict):
        raise HfConfigError(f"{p}: expected a JSON object with a 'model_type' key")
    problems = limits.structure_problems(data)
    if problems:
        key, value, rule, fix = problems[0]
        shown = "" if value is None else f" = {value!r}"
        raise HfConfigError(f"{p}: {key}{shown}: {rule} (fix: {fix})")
    _check_sizes(data, p)
    return data, p


#: The keys a config names its MLP activation with (Llama's and most decoders'
#: ``hidden_act``, Gemma's ``hidden_activation``, GPT-2's and OPT's ``activation_function``).
ACTIVATION_KEYS = ("hidden_act", "hidden_activation", "activation_function")
#: The activation names transformers builds (``src/transformers/activations.py``
#: ``ACT2CLS``, v4.5x): any other name fails in its ``ACT2FN[...]``.
HF_ACTIVATIONS = frozenset((
    "gelu", "gelu_10", "gelu_fast", "gelu_new", "gelu_python", "gelu_pytorch_tanh",
    "gelu_python_tanh", "gelu_accurate", "hardswish", "laplace", "leaky_relu", "linear", "mish",
    "quick_gelu", "relu", "relu2", "relu6", "sigmoid", "silu", "sqrtsoftplus", "swish", "tanh",
    "prelu", "xielu"))
#: GELU's approximations by tanh (or its fast forms), which a gated MLP names GeGLU as
#: Gemma's does (``gelu_tanh``); exact GELU stays ``gelu``.
TANH_GELUS = frozenset(("gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python_tanh",
                        "gelu_accurate"))


def activation_name(config: dict[str, Any], key: str, default: str, plain: bool = False) -> str:
    """The :class:`~autopar_opt.ir.arch.ModelArch` activation a config's ``key`` names
    (``default`` when absent): ``swish`` is ``silu``; a tanh-approximated GELU is
    ``gelu_tanh`` in a gated MLP, ``gelu`` in a plain one (GPT-2's ``gelu_new``:
    Megatron-LM's GELU is its MLP activation either way); other names as given
    (checked against :data:`HF_ACTIVATIONS` when the config was read)."""
    act = str(config.get(key) or default)
    if act == "swish":
        return "silu"
    if act in TANH_GELUS or act == "gelu_python":
        return "gelu" if plain or act == "gelu_python" else "gelu_tanh"
    return act


#: Switches the readers take as booleans: a string such as "no" would read as true, so
#: anything but true, false or null is refused.
BOOL_KEYS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "bias", "enable_bias",
             "no_bias", "do_layer_norm_before", "multi_query", "new_decoder_architecture",
             "parallel_attn", "use_parallel_residual", "alibi", "use_sliding_window",
             "use_bidirectional_attention", "use_bias", "use_qk_norm", "qk_layernorm",
             "lm_head_bias")


def _check_kinds(data: dict[str, Any], path: Path) -> None:
    """Refuse a switch that is not a boolean, an activation name that is not a string and
    a real value out of its range (:mod:`.hf_values`: the RoPE base and scaling, the rotary
    share, the normalisation epsilon, the logit soft-caps)."""
    for key in BOOL_KEYS:
        if data.get(key) not in (True, False, None):
            raise HfConfigError(f"{path}: {key} = {str(data[key])[:40]!r} is not true or false "
                                "(fix: write true or false, as the model's published config.json "
                                "does)")
    for key in ACTIVATION_KEYS:
        act = data.get(key)
        if act is None:
            continue
        if not isinstance(act, str):
            raise HfConfigError(f"{path}: {key} = {str(act)[:40]!r} is not an activation name "
                                "(fix: write its name, e.g. \"silu\" or \"relu2\", as the "
                                "model's published config.json does)")
        if act not in HF_ACTIVATIONS:
            from autopar_opt.core.errors import did_you_mean
            raise HfConfigError(f"{path}: {key} = {act[:40]!r} is not an activation transformers "
                                "knows (its ACT2FN would refuse the config)"
                                f"{did_you_mean(act, HF_ACTIVATIONS)} (fix: one of "
                                f"{', '.join(sorted(HF_ACTIVATIONS))})")
    from autopar_opt.model_zoo.hf_values import value_problems
    problem = value_problems(data, path)
    if problem:
        raise HfConfigError(problem)


def as_json(value: Any) -> str:
    """``value`` as the file spells it (JSON: ``"4096"`` quoted, ``4096.0``, ``true``), at
    most 40 characters (QA round 9: every value was shown quoted, as if a string)."""
    import json

    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def integer_fix(value: Any) -> str:
    """How to turn ``value`` into the integer a size key takes."""
    if isinstance(value, bool):
        return "fix: write a whole number, not true or false"
    if isinstance(value, float) and value.is_integer():
        return f"fix: write it without the decimal point, {int(value)}"
    if isinstance(value, str) and value.strip().isdigit():
        return f"fix: remove the quotes, {int(value)}"
    return "fix: write a whole number"


#: Counts that may be 0 but must be whole and not negative when present (DeepSeek-V3's
#: multi-token-prediction depth: said in the graph's assumptions, not built).
COUNT_KEYS = ("num_nextn_predict_layers",)


def _check_sizes(data: dict[str, Any], path: Path) -> None:
    """Refuse sizes that would hang or divide by zero, naming the key and the limit."""
    _check_kinds(data, path)
    for key in COUNT_KEYS:
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 0):
            raise HfConfigError(f"{path}: {key} = {str(value)[:40]!r} is not a whole number of "
                                "0 or more (fix: copy the value from the model's published "
                                "config.json, e.g. 1 for DeepSeek-V3)")
    for key, value in data.items():
        if not isinstance(value, int) or isinstance(value, bool):
            if key in POSITIVE_KEYS and value is not None:
                raise HfConfigError(f"{path}: {key} = {as_json(value)} is not an integer "
                                    f"({integer_fix(value)}, as the model's published "
                                    "config.json has it)")
            continue
        if key in LAYER_KEYS and value > limits.MAX_LAYERS:
            raise HfConfigError(f"{path}: {key} = {value} exceeds the limit of {limits.MAX_LAYERS} "
                                "layers (fix: use a model with fewer layers)")
        if value > limits.MAX_SEQ_LEN:
            raise HfConfigError(f"{path}: {key} = {value} exceeds the limit of "
                                f"{limits.MAX_SEQ_LEN} for a model dimension (fix: use the "
                                "model's published config.json)")
        if key in POSITIVE_KEYS and value <= 0:
            raise HfConfigError(f"{path}: {key} = {value} must be a positive integer (fix: use "
                                "the model's published config.json)")


#: The dropout keys (hidden, attention) of the families whose modelling code has a
#: hidden dropout, with their ``transformers`` configuration defaults. Every other
#: decoder family's code has none (``LlamaDecoderLayer``, ``MistralDecoderLayer``,
#: Qwen's, Gemma's, DeepSeek's: only ``attention_dropout``, default 0.0).
DROPOUT_KEYS = {"gpt2": (("resid_pdrop", 0.1), ("attn_pdrop", 0.1)),
                "gpt_neox": (("hidden_dropout", 0.0), ("attention_dropout", 0.0)),
                "opt": (("dropout", 0.1), ("attention_dropout", 0.0)),
                "bloom": (("hidden_dropout", 0.0), ("attention_dropout", 0.0)),
                "falcon": (("hidden_dropout", 0.0), ("attention_dropout", 0.0)),
                "phi3": (("resid_pdrop", 0.0), ("attention_dropout", 0.0)),
                "starcoder2": (("residual_dropout", 0.0), ("attention_dropout", 0.0)),
                "phi": (("resid_pdrop", 0.0), ("attention_dropout", 0.0)),
                # MptConfig: resid_pdrop; MptAttentionConfig (the attn_config object): attn_pdrop
                "mpt": (("resid_pdrop", 0.0), ("attn_config.attn_pdrop", 0.0))}


def dropout_rates(config: dict[str, Any], origin: str = "config.json") -> tuple[float, float]:
    """(hidden, attention) dropout probabilities a decoder config trains with: its
    family's keys (:data:`DROPOUT_KEYS`; a dotted key reads inside an object), else 0
    and ``attention_dropout``."""
    mt = config.get("model_type")
    keys = DROPOUT_KEYS.get(mt, (None, ("attention_dropout", 0.0)))
    out = []
    for entry in keys:
        if entry is None:
            out.append(0.0)
            continue
        key, default = entry
        inner = config
        for part in key.split(".")[:-1]:
            inner = inner.get(part) if isinstance(inner.get(part), dict) else {}
        value = inner.get(key.split(".")[-1], default)
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise HfConfigError(f"{origin}: {key} = {value!r} must be a probability in [0, 1) "
                                "(fix: use the value of the model's published config.json)")
        out.append(float(value))
    return out[0], out[1]
