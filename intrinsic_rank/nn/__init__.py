"""Torch modules: the ladder's students (B0-B3), Min-IP heads and prompted causal LMs."""

from ._causal_lm import CausalLMAdapter, TinyCausalLM, TinyLMAdapter, check_causal
from ._heads import QueryKeyHeads, attention_maps, query_key_weights
from ._hf import (
    HFCausalLMAdapter,
    HFEncoderAdapter,
    load_hf_causal_lm,
    load_hf_model,
    load_hf_tokenizer,
)
from ._kernel_attention import (
    DenseAttentionStudent,
    DenseSoftmaxHead,
    KernelAttentionStudent,
    NormalizedKernelHead,
    dense_error_bound,
    dense_min_ip_head,
    normalized_kernel_attention,
    rank_one_min_ip_head,
)
from ._lm_training import train_causal_lm
from ._prompted import (
    DEFAULT_MODEL_FILE,
    PromptedLM,
    as_causal_lm,
    load_default_model,
    random_prompt_hidden_states,
    save_tiny_lm,
)
from ._pretrained import PACKAGED_MODELS, PackagedModel, as_model_adapter, packaged_model_path
from ._registry import STUDENTS, make_student
from ._students import (
    FixedOperatorStudent,
    LinearAttentionStudent,
    RankBatchedStudent,
    SoftmaxAttentionStudent,
    TransformerBlockStudent,
    row_softmax,
)

__all__ = [
    "DEFAULT_MODEL_FILE",
    "STUDENTS",
    "CausalLMAdapter",
    "HFCausalLMAdapter",
    "HFEncoderAdapter",
    "PACKAGED_MODELS",
    "PackagedModel",
    "QueryKeyHeads",
    "as_model_adapter",
    "attention_maps",
    "load_hf_model",
    "load_hf_tokenizer",
    "packaged_model_path",
    "query_key_weights",
    "PromptedLM",
    "TinyCausalLM",
    "TinyLMAdapter",
    "as_causal_lm",
    "check_causal",
    "load_default_model",
    "load_hf_causal_lm",
    "random_prompt_hidden_states",
    "save_tiny_lm",
    "train_causal_lm",
    "DenseAttentionStudent",
    "DenseSoftmaxHead",
    "FixedOperatorStudent",
    "KernelAttentionStudent",
    "LinearAttentionStudent",
    "NormalizedKernelHead",
    "RankBatchedStudent",
    "SoftmaxAttentionStudent",
    "TransformerBlockStudent",
    "dense_error_bound",
    "dense_min_ip_head",
    "make_student",
    "normalized_kernel_attention",
    "rank_one_min_ip_head",
    "row_softmax",
]
