"""Learned cost models: features and a gradient-boosted ranker."""

from tunex.cost_model._base import CostModel
from tunex.cost_model._features import FeatureExtractor, flatten, trainable
from tunex.cost_model._gbm import GBMRanker, relevance

__all__ = ["CostModel", "FeatureExtractor", "GBMRanker", "flatten", "relevance",
           "trainable"]
