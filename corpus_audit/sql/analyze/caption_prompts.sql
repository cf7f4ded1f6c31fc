-- Captions as prompts (METHODS 1.5, the lower bound: P_o := S_o) and paraphrased captions.
-- Generated images whose prompt was a caption (images.caption_id set, source generated) belong
-- to every per-occupation training subset (keyword, no_indicators) that holds their caption
-- after the cut (temp table subset_members); images.strategy only names the first strategy
-- that asked for the caption, and 'paraphrased:...' marks a paraphrase of the caption.
-- Paraphrase images count only for the occupation they were paraphrased for.
-- Both sides use the same captions (the paper's P_o = S_o): per (model, set, occupation) the
-- captions of the subset whose training image has a female/male label AND that have generated
-- images of that model; T over their training images, G over their generated images.
-- n_captions says how many captions that leaves. Set names: captions_as_prompts (keyword
-- subset), captions_as_prompts_<strategy> otherwise; paraphrased_captions[_<strategy>].
WITH gen AS (
    SELECT DISTINCT
        i.image_id,
        coalesce(i.model_id, 'unknown') AS model_id,
        i.caption_id,
        s.occupation,
        s.state AS train_label,
        CASE WHEN coalesce(i.strategy, '') LIKE 'paraphrased:%' THEN 'paraphrased_captions'
             ELSE 'captions_as_prompts' END
        || CASE WHEN s.strategy = 'keyword' THEN '' ELSE '_' || s.strategy END AS strategy
    FROM images i
    JOIN subset_members s
      ON s.caption_id = i.caption_id
     AND s.prompt_id IS NULL
     AND s.member
     AND s.state IN ('female', 'male')
     AND (coalesce(i.strategy, '') NOT LIKE 'paraphrased:%' OR s.occupation = i.occupation)
    WHERE i.source = 'generated' AND i.caption_id IS NOT NULL
),
gen_counts AS (
    SELECT
        g.model_id, g.strategy, g.occupation,
        count(DISTINCT g.image_id) AS n_images,
        count(DISTINCT g.image_id) FILTER (WHERE a.label = 'female') AS n_female,
        count(DISTINCT g.image_id) FILTER (WHERE a.label = 'male') AS n_male
    FROM gen g
    LEFT JOIN analysis_labelled a ON a.image_id = g.image_id
    GROUP BY ALL
),
train_counts AS (
    SELECT
        model_id, strategy, occupation,
        count(*) AS n_captions,
        count(*) FILTER (WHERE train_label = 'female') AS n_female,
        count(*) FILTER (WHERE train_label = 'male') AS n_male
    FROM (SELECT DISTINCT model_id, strategy, occupation, caption_id, train_label FROM gen)
    GROUP BY ALL
)
SELECT
    g.model_id, g.strategy, g.occupation,
    t.n_captions,
    t.n_captions AS train_images,
    t.n_female AS train_female,
    t.n_male AS train_male,
    g.n_images AS gen_images,
    g.n_female AS gen_female,
    g.n_male AS gen_male
FROM gen_counts g
JOIN train_counts t USING (model_id, strategy, occupation)
ORDER BY g.model_id, g.strategy, g.occupation;
