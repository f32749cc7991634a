//! Fills `{{NAME}}` placeholders of a kernel template.

use super::CodegenError;

/// Replaces every `{{KEY}}` of `template` with its value. A placeholder without a value is an
/// error, so a template and its generator cannot silently drift apart.
pub(crate) fn render(
    template_name: &str,
    template: &str,
    values: &[(&str, String)],
) -> Result<String, CodegenError> {
    let mut out = String::with_capacity(template.len() + 4096);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| CodegenError::Template {
            template: template_name.to_string(),
            message: "unterminated `{{`".to_string(),
        })?;
        let key = &after[..end];
        let value =
            values
                .iter()
                .find(|(k, _)| *k == key)
                .ok_or_else(|| CodegenError::Template {
                    template: template_name.to_string(),
                    message: format!("no value for placeholder `{key}`"),
                })?;
        out.push_str(&value.1);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_placeholders_and_reports_missing_ones() {
        let values = [("N", "4".to_string()), ("T", "float".to_string())];
        let text = render("t", "constexpr {{T}} x[{{N}}]; {%0}", &values).unwrap();
        assert_eq!(text, "constexpr float x[4]; {%0}");
        let err = render("t", "{{MISSING}}", &values).unwrap_err();
        assert!(err.to_string().contains("MISSING"), "{err}");
        assert!(render("t", "{{N", &values).is_err());
    }
}
