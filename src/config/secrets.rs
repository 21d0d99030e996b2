//! `${env:NAME}` and `${file:PATH}` references: expanding them in tokens, headers and URLs
//! without ever putting the resolved value into a message.

use super::Env;
use super::files::{self, MAX_SECRET_FILE_BYTES};
use super::walk::{self, Ctx};
use super::yaml::{Node, Pos};
use std::path::Path;

/// Expands `${env:NAME}` and `${file:PATH}` references. Messages never include the value.
pub fn expand(
    ctx: &mut Ctx,
    text: &str,
    pos: Pos,
    path: &str,
    base: &Path,
    env: &Env,
) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    let mut ok = true;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            ctx.error(pos, path, "`${` without a closing `}`");
            return None;
        };
        let reference = &after[..end];
        match reference.split_once(':') {
            Some(("env" | "file", _)) if !env.resolve_secrets => out.push_str("unresolved"),
            Some(("env", name)) => match env.var(name) {
                Some(v) => {
                    out.push_str(&v);
                    ctx.secrets.push(v);
                }
                None => {
                    ctx.error(
                        pos,
                        path,
                        format!("environment variable `{name}` is not set"),
                    );
                    ok = false;
                }
            },
            Some(("file", file)) => match read_secret(&base.join(file)) {
                Ok(v) => {
                    let v = v.trim_end_matches(['\n', '\r']);
                    out.push_str(v);
                    ctx.secrets.push(v.to_string());
                }
                Err(e) => {
                    ctx.error(pos, path, format!("cannot read `{file}`: {e}"));
                    ok = false;
                }
            },
            _ => {
                ctx.error(
                    pos,
                    path,
                    format!("unknown reference `${{{reference}}}`: use `${{env:NAME}}` or `${{file:PATH}}`"),
                );
                ok = false;
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    ok.then_some(out)
}

/// A `${file:}` secret: a regular file of at most [`MAX_SECRET_FILE_BYTES`], in UTF-8.
fn read_secret(path: &Path) -> Result<String, String> {
    let bytes = files::read_regular(path, "a `${file:}` secret", MAX_SECRET_FILE_BYTES)?;
    String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".to_string())
}

pub fn secret(ctx: &mut Ctx, node: &Node, path: &str, base: &Path, env: &Env) -> Option<String> {
    let text = walk::string(ctx, node, path)?;
    if !text.contains("${") {
        ctx.warn(
            node.pos,
            path,
            "a literal token in the config file; prefer `${env:NAME}` or `${file:PATH}`",
        );
    }
    let value = expand(ctx, &text, node.pos, path, base, env)?;
    if value.is_empty() {
        ctx.error(node.pos, path, "the token is empty");
        return None;
    }
    Some(value)
}

/// Expands the references in a command-line value (`run --url`, `-H`) from `env`, relative
/// paths from the working directory. The error is the first problem, never a resolved value.
pub fn expand_flag(text: &str, env: &Env) -> Result<String, String> {
    let mut ctx = Ctx::default();
    let pos = Pos { line: 1, col: 1 };
    expand(&mut ctx, text, pos, "", Path::new("."), env).ok_or_else(|| {
        ctx.errors
            .first()
            .map(|d| d.message.clone())
            .unwrap_or_default()
    })
}
