"""Reinforcement learning with policy particles: heads, rollout, estimators, critics, the SVPG agent and job."""
