"""Simulated environments of SkillExecBench (the SKILL.state paper, section 4.1 and Appendix B)."""
