-- Captions that may be used as prompts (captions as prompts, paraphrased captions): the
-- members of the training subsets of $strategies after the cut (temp table subset_members,
-- sql/subsets/cut.sql). $which = 'labelled' (generate.caption_prompts, default; the paper's
-- P_o = S_o) keeps those whose training image got a female/male label, 'all' every member.
-- A subset whose cut is not settled yet (a candidate it went through still waits for the
-- face filter or a label) gives no prompt: its members can still change.
-- Same columns as `samples`, so the caption and paraphrase queries read it in its place.
CREATE OR REPLACE TEMP TABLE subset_prompt_captions AS
SELECT m.strategy, m.occupation, m.prompt_id, m.caption_id, m.rank
FROM subset_members m
WHERE m.member
  AND list_contains($strategies, m.strategy)
  AND ($which = 'all' OR m.state IN ('female', 'male'))
  AND NOT EXISTS (
      SELECT 1 FROM subset_members p
      WHERE p.strategy = m.strategy AND p.occupation = m.occupation
        AND p.prompt_id IS NOT DISTINCT FROM m.prompt_id
        AND p.scanned AND p.state = 'pending'
  );
